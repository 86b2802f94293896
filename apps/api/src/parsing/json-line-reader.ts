// The pieces of a JSON line read straight from its bytes, for the line shapes an offline batch
// holds by the hundred thousand (a batch input file's predict line, an NDJSON item): strings
// without escapes, whole objects of known keys, and lists of numbers read as JSON.parse reads
// them. A reader built on these takes only lines JSON.parse accepts and reads them as it does;
// whatever it is not sure of (an escape, a control character, a number it cannot read exactly,
// whitespace JSON does not know) it refuses, and its caller hands that line to JSON.parse.
import { FP32_MAX } from "@ferry/protocol";

/** Where a line's numbers go: rows back to back (FP32, as the model takes them). */
export interface ScannedValues {
  values: Float32Array;
  /** Values written so far; a line not taken leaves it where it was. */
  length: number;
}

/** Integers below this are exact in a double. */
const EXACT = 2 ** 53;
/** Powers of ten a double holds exactly: a mantissa < 2^53 times or over one rounds once. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);
/**
 * Numbers a line may have read from their text before it goes to JSON.parse: a string and
 * Number() each cost ~250 ns, JSON.parse's reading ~145 (a line of 784 17-digit floats took
 * 1.7 times as long scanned), while a line with a few (one changed feature) gains the scan.
 */
const MOST_FROM_TEXT = 16;

const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const BACKSLASH = 0x5c;

// a byte order mark inside a string is a character of it, as JSON.parse keeps it
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A cursor over one line's bytes and the reads a line reader is made of. */
export class JsonLineReader {
  private b: Uint8Array = new Uint8Array(0);
  private i = 0;
  private end = 0;
  /** Where the last string read starts and ends (its quotes excluded), and if all ASCII. */
  private s0 = 0;
  private s1 = 0;
  private ascii = true;
  private latin1: Buffer = Buffer.alloc(0);
  /** Numbers of this line read from their text. */
  private fromText = 0;

  /** Puts the cursor on bytes[start, end). */
  protected begin(bytes: Uint8Array, start: number, end: number): void {
    if (this.b !== bytes) {
      this.b = bytes;
      this.latin1 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    this.i = start;
    this.end = end;
    this.fromText = 0;
  }

  /**
   * `{"key": value, ...}` at the cursor, every key one of `keys` and its value read by
   * `value(which)`; false where anything is not so (the caller's line is not taken).
   */
  protected members(keys: readonly Uint8Array[], value: (which: number) => boolean): boolean {
    if (!this.take(OPEN_BRACE)) return false;
    for (;;) {
      if (!this.string()) return false;
      const which = this.oneOf(keys);
      if (which < 0 || !this.take(COLON) || !value(which)) return false;
      if (!this.take(COMMA)) return this.take(CLOSE_BRACE);
    }
  }

  /** Whether only whitespace is left of the line. */
  protected atEnd(): boolean {
    this.skip();
    return this.i === this.end;
  }

  /**
   * `[n, ...]` at the cursor, its numbers appended to `out` while it has room; their count, or
   * -1 (what was appended then is the caller's to drop).
   */
  protected numbers(out: ScannedValues): number {
    if (!this.take(OPEN_BRACKET)) return -1;
    const { values } = out;
    const b = this.b;
    const end = this.end;
    const first = out.length;
    let n = first;
    for (;;) {
      if (n === values.length) return -1;
      // the usual value, a whole number of a few digits and its comma, read here; the rest
      // (a sign, a fraction, an exponent, whitespace) by `number`
      let i = this.i;
      let c = b[i] ?? 0;
      let v = 0;
      if (c > ZERO && c <= NINE) {
        v = c - ZERO;
        c = b[++i] ?? 0;
        if (c >= ZERO && c <= NINE) {
          v = v * 10 + (c - ZERO);
          c = b[++i] ?? 0;
          if (c >= ZERO && c <= NINE) {
            v = v * 10 + (c - ZERO);
            c = b[++i] ?? 0;
          }
        }
      } else if (c === ZERO) c = b[++i] ?? 0;
      else c = -1;
      if (i < end && (c === COMMA || c === CLOSE_BRACKET)) {
        values[n++] = v;
        this.i = i + 1;
        if (c === COMMA) continue;
        break;
      }
      this.skip();
      const read = this.number();
      if (read === undefined || !(Math.abs(read) <= FP32_MAX)) return -1;
      values[n++] = read;
      if (this.take(COMMA)) continue;
      if (!this.take(CLOSE_BRACKET)) return -1;
      break;
    }
    out.length = n;
    return n - first;
  }

  /**
   * A JSON number at the cursor (whitespace skipped before), as JSON.parse reads it: where its
   * digits make an integer below 2^53 and its power of ten is within 10^22, one exact product
   * or quotient (correctly rounded, as the decimal's nearest double is); else Number of its
   * text, which for a JSON number's text is the same (undefined past MOST_FROM_TEXT a line).
   */
  private number(): number | undefined {
    const b = this.b;
    const end = this.end;
    const start = this.i;
    let i = start;
    const negative = b[i] === MINUS;
    if (negative) i++;
    let c = b[i] ?? 0;
    if (c < ZERO || c > NINE || i >= end) return undefined;
    let m = 0;
    let digits = 0;
    if (c === ZERO) i++;
    else
      for (; i < end; i++) {
        c = b[i] ?? 0;
        if (c < ZERO || c > NINE) break;
        m = m * 10 + (c - ZERO);
        digits++;
      }
    let exponent = 0;
    if (i < end && b[i] === DOT) {
      i++;
      const from = i;
      for (; i < end; i++) {
        c = b[i] ?? 0;
        if (c < ZERO || c > NINE) break;
        m = m * 10 + (c - ZERO);
        digits++;
      }
      if (i === from) return undefined;
      exponent = from - i;
    }
    c = b[i] ?? 0;
    if (i < end && (c === 0x65 || c === 0x45)) {
      i++;
      c = b[i] ?? 0;
      const sign = c === MINUS ? -1 : 1;
      if (c === MINUS || c === PLUS) i++;
      const from = i;
      let e = 0;
      for (; i < end; i++) {
        c = b[i] ?? 0;
        if (c < ZERO || c > NINE) break;
        if (e < 10_000) e = e * 10 + (c - ZERO);
      }
      if (i === from) return undefined;
      exponent += sign * e;
    }
    this.i = i;
    let v: number;
    if (digits <= 15 && m < EXACT && exponent >= -22 && exponent <= 22)
      v = exponent < 0 ? m / (POW10[-exponent] as number) : m * (POW10[exponent] as number);
    else {
      // digits past 15 may have rounded m already, and a power past 10^22 is not exact: read
      // from its text, a string made for it; a line of many such (a float's 17 digits, as
      // Python and NumPy print them) goes to JSON.parse, which reads them for less
      if (++this.fromText > MOST_FROM_TEXT) return undefined;
      v = Number(this.latin1.toString("latin1", start + (negative ? 1 : 0), i));
    }
    return negative ? -v : v;
  }

  /** A string at the cursor (whitespace skipped before): false if it has an escape or a control. */
  protected string(): boolean {
    this.skip();
    const b = this.b;
    const end = this.end;
    if (b[this.i] !== QUOTE) return false;
    let i = this.i + 1;
    let ascii = true;
    for (; i < end; i++) {
      const c = b[i] ?? 0;
      if (c === QUOTE) break;
      if (c === BACKSLASH || c < 0x20) return false;
      if (c >= 0x80) ascii = false;
    }
    if (i >= end) return false;
    this.s0 = this.i + 1;
    this.s1 = i;
    this.ascii = ascii;
    this.i = i + 1;
    return true;
  }

  /** The last string read, decoded; undefined if its bytes are not UTF-8 (JSON.parse says). */
  protected text(): string | undefined {
    if (this.ascii) return this.latin1.toString("latin1", this.s0, this.s1);
    try {
      return utf8.decode(this.b.subarray(this.s0, this.s1));
    } catch {
      return undefined;
    }
  }

  /** Which of `words` the last string read is, or -1. */
  protected oneOf(words: readonly Uint8Array[]): number {
    for (let k = 0; k < words.length; k++) if (this.is(words[k] as Uint8Array)) return k;
    return -1;
  }

  /** Whether the last string read is exactly `word`. */
  protected is(word: Uint8Array): boolean {
    if (this.s1 - this.s0 !== word.length) return false;
    for (let k = 0; k < word.length; k++) if (this.b[this.s0 + k] !== word[k]) return false;
    return true;
  }

  /** Skips whitespace, then takes `c` if it is next. */
  protected take(c: number): boolean {
    this.skip();
    if (this.i < this.end && this.b[this.i] === c) {
      this.i++;
      return true;
    }
    return false;
  }

  /** JSON's whitespace: space, tab, carriage return (a line holds no line feed). */
  protected skip(): void {
    const b = this.b;
    const end = this.end;
    let i = this.i;
    for (; i < end; i++) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x09 && c !== 0x0d) break;
    }
    this.i = i;
  }
}
