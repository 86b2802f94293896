import { FerryError } from "@ferry/protocol";

/**
 * What JSON.parse spends on each thing it makes, in bytes of a list of floats (~17 ns a byte
 * with its garbage, Node 20) it reads in the same time, fitted to 8 MB bodies of each shape:
 * `[0,0,...]` ~87 ns an element, `{}`s ~660 ns each, `[1]`s ~680, distinct short strings ~550,
 * an object of a million distinct keys ~1.1 us a key, objects of one distinct key ~2 us each;
 * each priced at or above that, chat messages ~9x above (bounded by their own budgets). Priced
 * by its bytes alone, 8 MB of `{}` had cost the loop ~1.6 s on `/v1/jobs` (a neighbour's p50
 * 2.2 ms -> 1.8 s), a million distinct keys ~1.5 s; a list of floats weighs ~1.15x its bytes.
 */
export const WEIGHT = {
  /** An object or a list: `{`, `[`. */
  container: 40,
  /** An element or property past the first: `,`. */
  comma: 3,
  /** A property: `:` (its key is a string besides). */
  colon: 56,
  /** A string, a key's too: a string of its own, a short one looked up in V8's string table. */
  string: 24,
  /**
   * A number decoded from a binary tensor (Triton's binary form) besides its bytes: an array
   * element the schema then checks, ~175 ns for a BOOL's byte, ~245 for an FP32's four.
   */
  element: 10,
} as const;

const STRUCTURAL = ["{", "[", ",", ":"] as const;
const COST = [WEIGHT.container, WEIGHT.container, WEIGHT.comma, WEIGHT.colon];

/**
 * A JSON body's weight: its bytes (a decoded body's characters), and `WEIGHT` for each thing
 * outside its strings that JSON.parse makes; undefined once past `most`, found without reading
 * on. At memchr's speed: each kind of character is found by `indexOf` from where it was last
 * seen, a string skipped whole (its closing quote found the same way), so a 7 MB prompt is a
 * few searches and a list of numbers one visit a comma. A text that is not JSON is weighed all
 * the same (JSON.parse then refuses it).
 */
export function jsonWeight(body: Uint8Array | string, most: number): number | undefined {
  const text =
    typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const slash =
    typeof text === "string"
      ? (k: number) => text.charCodeAt(k) === 0x5c
      : (k: number) => text[k] === 0x5c;
  const length = text.length;
  let weight = length;
  if (weight > most) return undefined;
  const next = STRUCTURAL.map((ch) => text.indexOf(ch, 0));
  let from = 0;
  for (;;) {
    const open = text.indexOf('"', from);
    const end = open === -1 ? length : open;
    for (let k = 0; k < STRUCTURAL.length; k++) {
      let at = next[k] as number;
      while (at !== -1 && at < end) {
        weight += COST[k] as number;
        if (weight > most) return undefined;
        at = text.indexOf(STRUCTURAL[k] as string, at + 1);
      }
      next[k] = at;
    }
    if (open === -1) return weight;
    weight += WEIGHT.string;
    if (weight > most) return undefined;
    // the closing quote: the next one not escaped (an odd run of backslashes before it)
    let close = text.indexOf('"', open + 1);
    for (;;) {
      if (close === -1) return weight; // unterminated: not JSON
      let slashes = 0;
      while (close - slashes - 1 > open && slash(close - slashes - 1)) slashes++;
      if (slashes % 2 === 0) break;
      close = text.indexOf('"', close + 1);
    }
    from = close + 1;
    // what was seen inside the string is not the body's: looked for again past it
    for (let k = 0; k < STRUCTURAL.length; k++) {
      const at = next[k] as number;
      if (at !== -1 && at < from) next[k] = text.indexOf(STRUCTURAL[k] as string, from);
    }
  }
}

/** The 413 of a body past its weight: `most` is the route's largest body. */
export function tooHeavy(most: number): FerryError {
  return new FerryError(
    "PAYLOAD_TOO_LARGE",
    `Request body costs more to read than its route's largest body (${most} bytes) of numbers: each object or list costs what ${WEIGHT.container} bytes of them do, each string ${WEIGHT.string}, each property ${WEIGHT.colon} and each element ${WEIGHT.comma} more`,
  );
}

/**
 * The `{` and `[` of a JSON text outside its strings (the objects and lists it makes), up to
 * `most`: a JSON batch's density rule, on the parse thread.
 */
export function containersUpTo(bytes: Uint8Array, most = Number.POSITIVE_INFINITY): number {
  let count = 0;
  let inString = false;
  for (let k = 0; k < bytes.length; k++) {
    const b = bytes[k];
    if (inString) {
      if (b === 0x5c) k++;
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if ((b === 0x7b || b === 0x5b) && ++count >= most) return count;
  }
  return count;
}
