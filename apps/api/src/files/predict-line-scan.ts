// A batch input file's plain predict line read straight from its bytes: the shape nearly every
// line of a classifier's batch file has, `{"custom_id","method","url","body":{"features":[...]}}`.
// JSON.parse built a string of the line, an object of it and an array of its numbers (784 of
// them on an MNIST line), and packing walked that array again: on a 60 MB file that was most of
// an upload's time. This reads the line once, its numbers into the values being packed. It
// accepts only lines JSON.parse accepts and reads them as JSON.parse does; anything else (a
// key it does not know, an escape in a string, a key twice, a number it cannot read exactly,
// a byte that is not ASCII outside a string) it leaves to JSON.parse, which also words the
// errors.

import {
  CLOSE_BRACE,
  COLON,
  COMMA,
  JsonLineReader,
  OPEN_BRACE,
  type ScannedValues,
} from "../parsing/json-line-reader.js";

export type { ScannedValues };

/** What the line says beside its features (written to `ScannedValues`). */
export interface ScannedLine {
  customId: string;
  url: string;
  width: number;
}

const KEYS = ["custom_id", "method", "url", "body"].map((k) => Buffer.from(k));
const FEATURES = Buffer.from("features");
const POST = Buffer.from("POST");

/** A line's reader; `scan` returns undefined for any line it leaves to JSON.parse. */
export class PredictLineScanner extends JsonLineReader {
  /**
   * Reads bytes[start, end) as a plain predict line: its features appended to `out`, its
   * custom_id and url returned undecided (the caller checks them as a parsed line's).
   */
  scan(bytes: Uint8Array, start: number, end: number, out: ScannedValues): ScannedLine | undefined {
    this.begin(bytes, start, end);
    const before = out.length;
    const line = this.line(out);
    if (line === undefined) out.length = before;
    return line;
  }

  private line(out: ScannedValues): ScannedLine | undefined {
    let customId: string | undefined;
    let url: string | undefined;
    let method = false;
    let width = -1;
    if (!this.take(OPEN_BRACE)) return undefined;
    for (;;) {
      if (!this.string()) return undefined;
      const key = this.oneOf(KEYS);
      if (key < 0 || !this.take(COLON)) return undefined;
      if (key === 0) {
        if (customId !== undefined || !this.string()) return undefined;
        customId = this.text();
        if (customId === undefined) return undefined;
      } else if (key === 1) {
        if (method || !this.string() || !this.is(POST)) return undefined;
        method = true;
      } else if (key === 2) {
        if (url !== undefined || !this.string()) return undefined;
        url = this.text();
        if (url === undefined) return undefined;
      } else {
        if (width >= 0) return undefined;
        width = this.body(out);
        if (width < 0) return undefined;
      }
      if (this.take(COMMA)) continue;
      if (!this.take(CLOSE_BRACE)) return undefined;
      break;
    }
    if (!this.atEnd() || customId === undefined || url === undefined || !method) return undefined;
    if (width < 0) return undefined;
    return { customId, url, width };
  }

  /** `{"features":[n, ...]}`, its numbers appended to `out`; their count, or -1. */
  private body(out: ScannedValues): number {
    if (!this.take(OPEN_BRACE) || !this.string() || !this.is(FEATURES)) return -1;
    if (!this.take(COLON)) return -1;
    const width = this.numbers(out);
    if (width < 0 || !this.take(CLOSE_BRACE)) return -1;
    return width;
  }
}
