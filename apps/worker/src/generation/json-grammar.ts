import type { ByteGrammar } from "./guide.js";
import { utf8Follows, utf8Lead } from "./utf8.js";

/**
 * An incremental recogniser of one JSON object (RFC 8259) over UTF-8 bytes: `feed` takes the
 * next byte and says whether the text so far can still begin a JSON object; `complete` says
 * whether it is one, whole. It holds a small state (a mode and the open containers), so that
 * a candidate token is tried on a copy.
 */

/** Containers open at once at most: deeper nesting is refused as it is written. */
const MAX_DEPTH = 32;
/** Whitespace bytes in a row at most (room for indentation): a model looping on blanks must go on. */
const MAX_BLANKS = 16;

type Mode =
  /** Before the top-level object: only `{` (whitespace first). */
  | "start"
  /** A value expected (after `:` or `,` in an array). */
  | "value"
  /** Just after `[`: a value or `]`. */
  | "array-first"
  /** Just after `{`: a key or `}`. */
  | "object-first"
  /** After `,` in an object: a key. */
  | "key"
  /** After a key: `:`. */
  | "colon"
  /** After a value in a container: `,` or the container's end. */
  | "after-value"
  /** Inside a string (a key's when `key` is set). */
  | "string"
  | "escape"
  /** Inside a literal (`true`, `false`, `null`): `rest` holds its bytes still to come. */
  | "literal"
  /** The top-level object is closed: nothing more. */
  | "done";

/** Where a number is: what may follow (a byte the number does not take ends it). */
type NumberPart = "minus" | "zero" | "int" | "dot" | "frac" | "e" | "e-sign" | "exp";

const BLANK = new Set([0x20, 0x0a, 0x0d, 0x09]);
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);
const isExponent = (b: number) => b === 0x65 || b === 0x45;

/** A number's next part after each part, given the next byte (undefined: it does not take it). */
const NUMBER: Record<NumberPart, (b: number) => NumberPart | undefined> = {
  minus: (b) => (b === 0x30 ? "zero" : isDigit(b) ? "int" : undefined),
  zero: (b) => (b === 0x2e ? "dot" : isExponent(b) ? "e" : undefined),
  int: (b) => (isDigit(b) ? "int" : b === 0x2e ? "dot" : isExponent(b) ? "e" : undefined),
  dot: (b) => (isDigit(b) ? "frac" : undefined),
  frac: (b) => (isDigit(b) ? "frac" : isExponent(b) ? "e" : undefined),
  e: (b) => (isDigit(b) ? "exp" : b === 0x2b || b === 0x2d ? "e-sign" : undefined),
  "e-sign": (b) => (isDigit(b) ? "exp" : undefined),
  exp: (b) => (isDigit(b) ? "exp" : undefined),
};
/** The parts a number may end after. */
const NUMBER_ENDS = new Set<NumberPart>(["zero", "int", "frac", "exp"]);

const LITERALS = new Map<number, number[]>([
  [0x74, [...Buffer.from("rue")]],
  [0x66, [...Buffer.from("alse")]],
  [0x6e, [...Buffer.from("ull")]],
]);

/** The language every JSON-object grammar recognises: guides share what they learn about it. */
const JSON_OBJECT = {};

export class JsonObjectGrammar implements ByteGrammar {
  private mode: Mode = "start";
  /** Open containers, innermost last: `{` or `[` (a string: copies share it). */
  private stack = "";
  private key = false;
  private number: NumberPart | undefined;
  private rest: number[] = [];
  /** Hex digits still to come in a `\u` escape. */
  private hex = 0;
  /** A character in progress in a string: its first byte, and how many bytes are still to come. */
  private lead = 0;
  private continuation = 0;
  private blanks = 0;

  copy(): JsonObjectGrammar {
    const c = new JsonObjectGrammar();
    c.mode = this.mode;
    c.stack = this.stack;
    c.key = this.key;
    c.number = this.number;
    c.rest = this.rest;
    c.hex = this.hex;
    c.lead = this.lead;
    c.continuation = this.continuation;
    c.blanks = this.blanks;
    return c;
  }

  get language(): object {
    return JSON_OBJECT;
  }

  /** Only what the rest of the text depends on: the last character's first byte, say, only inside it. */
  get stateKey(): string {
    const inString = this.mode === "string" || this.mode === "escape";
    return [
      this.mode,
      this.stack,
      inString && this.key ? "k" : "",
      this.number ?? "",
      this.rest.join(","),
      this.hex,
      this.continuation > 0 ? `${this.lead}/${this.continuation}` : "",
      this.blanks,
    ].join("|");
  }

  /** Whether the text so far is one whole JSON object. */
  get complete(): boolean {
    return this.mode === "done";
  }

  /** Whether anything may follow: not once the object is closed. */
  get open(): boolean {
    return this.mode !== "done";
  }

  /** Takes the next byte; false (and the state is then spoilt) when no JSON object goes on so. */
  feed(b: number): boolean {
    if (this.number !== undefined) {
      if (this.takeDigit(b)) return true;
      if (!NUMBER_ENDS.has(this.number)) return false;
      this.number = undefined;
      this.mode = "after-value";
    }
    if (BLANK.has(b) && this.blankAllowed()) {
      this.blanks++;
      return this.blanks <= MAX_BLANKS;
    }
    this.blanks = 0;
    switch (this.mode) {
      case "start":
        return b === 0x7b && this.openContainer(b);
      case "value":
        return this.startValue(b);
      case "array-first":
        return b === 0x5d ? this.close(b) : this.startValue(b);
      case "object-first":
        return b === 0x7d ? this.close(b) : this.startKey(b);
      case "key":
        return this.startKey(b);
      case "colon":
        if (b !== 0x3a) return false;
        this.mode = "value";
        return true;
      case "after-value":
        if (b === 0x2c) {
          this.mode = this.stack.endsWith("{") ? "key" : "value";
          return true;
        }
        return (b === 0x7d || b === 0x5d) && this.close(b);
      case "string":
        return this.inString(b);
      case "escape":
        return this.inEscape(b);
      case "literal":
        if (this.rest[0] !== b) return false;
        this.rest = this.rest.slice(1);
        if (this.rest.length === 0) this.mode = "after-value";
        return true;
      case "done":
        return false;
    }
  }

  private blankAllowed(): boolean {
    return (
      this.mode !== "string" &&
      this.mode !== "escape" &&
      this.mode !== "literal" &&
      this.mode !== "done"
    );
  }

  private startKey(b: number): boolean {
    if (b !== 0x22) return false;
    this.mode = "string";
    this.key = true;
    return true;
  }

  private startValue(b: number): boolean {
    if (b === 0x7b || b === 0x5b) return this.openContainer(b);
    if (b === 0x22) {
      this.mode = "string";
      this.key = false;
      return true;
    }
    if (b === 0x2d || isDigit(b)) {
      this.number = b === 0x2d ? "minus" : b === 0x30 ? "zero" : "int";
      return true;
    }
    const literal = LITERALS.get(b);
    if (!literal) return false;
    this.mode = "literal";
    this.rest = literal;
    return true;
  }

  private openContainer(b: number): boolean {
    if (this.stack.length >= MAX_DEPTH) return false;
    this.stack += String.fromCharCode(b);
    this.mode = b === 0x7b ? "object-first" : "array-first";
    return true;
  }

  private close(b: number): boolean {
    const open = this.stack.charCodeAt(this.stack.length - 1);
    if ((b === 0x7d && open !== 0x7b) || (b === 0x5d && open !== 0x5b)) return false;
    this.stack = this.stack.slice(0, -1);
    this.mode = this.stack.length === 0 ? "done" : "after-value";
    return true;
  }

  private inString(b: number): boolean {
    if (this.continuation > 0) {
      const size = utf8Lead(this.lead)?.size ?? 0;
      if (!utf8Follows(this.lead, size - this.continuation, b)) return false;
      this.continuation--;
      return true;
    }
    if (b === 0x22) {
      this.mode = this.key ? "colon" : "after-value";
      return true;
    }
    if (b === 0x5c) {
      this.mode = "escape";
      return true;
    }
    if (b < 0x20) return false;
    // a UTF-8 character's first byte, and how many follow it
    const lead = utf8Lead(b);
    if (!lead) return false;
    this.lead = b;
    this.continuation = lead.size - 1;
    return true;
  }

  private inEscape(b: number): boolean {
    if (this.hex > 0) {
      if (!isHex(b)) return false;
      this.hex--;
      if (this.hex === 0) this.mode = "string";
      return true;
    }
    if (b === 0x75) {
      this.hex = 4;
      return true;
    }
    if (!'"\\/bfnrt'.includes(String.fromCharCode(b))) return false;
    this.mode = "string";
    return true;
  }

  /** A byte the number in progress takes; false leaves it for what follows the number. */
  private takeDigit(b: number): boolean {
    const next = this.number === undefined ? undefined : NUMBER[this.number](b);
    if (next === undefined) return false;
    this.number = next;
    return true;
  }
}
