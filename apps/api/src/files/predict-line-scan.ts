// A batch input file's plain predict line read straight from its bytes: the shape nearly every
// line of a classifier's batch file has, `{"custom_id","method","url","body":{"features":[...]}}`.
// JSON.parse built a string of the line, an object of it and an array of its numbers (784 of
// them on an MNIST line), and packing walked that array again: on a 60 MB file that was most of
// an upload's time. This reads the line once, its numbers into the values being packed. It
// accepts only lines JSON.parse accepts and reads them as JSON.parse does; anything else (a
// key it does not know, an escape in a string, a key twice, a number it cannot read exactly,
// a byte that is not ASCII outside a string) it leaves to JSON.parse, which also words the
// errors.

import { JsonLineReader, type ScannedValues } from "../parsing/json-line-reader.js";

export type { ScannedValues };

/** What the line says beside its features (written to `ScannedValues`). */
export interface ScannedLine {
  customId: string;
  url: string;
  width: number;
}

const KEYS = ["custom_id", "method", "url", "body"].map((k) => Buffer.from(k));
const BODY_KEYS = [Buffer.from("features")];
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
    const taken = this.members(KEYS, (key) => {
      if (key === 0) {
        if (customId !== undefined || !this.string()) return false;
        customId = this.text();
        return customId !== undefined;
      }
      if (key === 1) {
        if (method || !this.string() || !this.is(POST)) return false;
        method = true;
        return true;
      }
      if (key === 2) {
        if (url !== undefined || !this.string()) return false;
        url = this.text();
        return url !== undefined;
      }
      if (width >= 0) return false;
      width = this.body(out);
      return width >= 0;
    });
    if (!taken || !this.atEnd() || customId === undefined || url === undefined || !method)
      return undefined;
    if (width < 0) return undefined;
    return { customId, url, width };
  }

  /** `{"features":[n, ...]}`, its numbers appended to `out`; their count, or -1. */
  private body(out: ScannedValues): number {
    let width = -1;
    const taken = this.members(BODY_KEYS, () => {
      if (width >= 0) return false;
      width = this.numbers(out);
      return width >= 0;
    });
    return taken ? width : -1;
  }
}
