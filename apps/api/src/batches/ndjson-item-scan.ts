// An NDJSON batch's item read straight from its bytes: `{"key": "...", "features": [...]}`,
// the shape of nearly every line of Ferry's own batch. Decoding each segment to text and
// JSON.parse of each line (a string, an object and an array of 784 numbers an MNIST line,
// walked again to pack them) was most of an NDJSON post's time. This reads the line once, its
// numbers into the rows being packed, and only as JSON.parse would read it; anything else (a
// third key, a key twice, an escape, whitespace JSON does not know) is left to JSON.parse,
// which also words the errors.
import { JsonLineReader, type ScannedValues } from "../parsing/json-line-reader.js";

const KEYS = ["key", "features"].map((k) => Buffer.from(k));

/** An item's reader; `scan` returns undefined for any line it leaves to JSON.parse. */
export class NdjsonItemScanner extends JsonLineReader {
  /**
   * Reads bytes[start, end) as an item: its features appended to `out`, its key returned
   * unchecked (the caller checks it as a parsed item's) with how many features it had.
   */
  scan(
    bytes: Uint8Array,
    start: number,
    end: number,
    out: ScannedValues,
  ): { key: string; width: number } | undefined {
    this.begin(bytes, start, end);
    const before = out.length;
    const item = this.item(out);
    if (item === undefined) out.length = before;
    return item;
  }

  private item(out: ScannedValues): { key: string; width: number } | undefined {
    let key: string | undefined;
    let width = -1;
    const taken = this.members(KEYS, (which) => {
      if (which === 0) {
        if (key !== undefined || !this.string()) return false;
        key = this.text();
        return key !== undefined;
      }
      if (width >= 0) return false;
      width = this.numbers(out);
      return width >= 0;
    });
    if (!taken || !this.atEnd() || key === undefined || width < 0) return undefined;
    return { key, width };
  }
}
