import { isDeepStrictEqual } from "node:util";

/**
 * Copies of a JSON line damaged at random (a byte changed, added or taken out, one to three
 * times), from a fixed seed: what the line readers' fuzz tests compare with JSON.parse.
 */
export function* damagedLines(
  base: Uint8Array,
  alphabet: Uint8Array,
  count: number,
  seed: number,
): Generator<Buffer> {
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  for (let k = 0; k < count; k++) {
    let text = Buffer.from(base);
    const edits = 1 + Math.floor(random() * 3);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(random() * text.length);
      const byte = alphabet[Math.floor(random() * alphabet.length)] as number;
      const kind = random();
      if (kind < 0.4) text[at] = byte;
      else if (kind < 0.7)
        text = Buffer.concat([text.subarray(0, at), Buffer.of(byte), text.subarray(at)]);
      else text = Buffer.concat([text.subarray(0, at), text.subarray(at + 1)]);
    }
    yield text;
  }
}

/** Lists of numbers JSON.parse refuses, each as a line's features would hold it. */
export const BAD_NUMBER_LISTS = ["01", "00,1", "2,", "1.", ".5", "-", "1e", "+1", "1,", "1 2"];

/**
 * `line` broken as JSON.parse refuses it: a control character in the string `"r1"` it holds,
 * cut short, something after it, its first colon gone.
 */
export function brokenLines(line: string): string[] {
  return [line.replace('"r1"', '"r\u00011"'), line.slice(0, -1), `${line}x`, line.replace(":", "")];
}

/** `line` with a byte that is not UTF-8 in place of the `r` of the string `"r1"` it holds. */
export function notUtf8(line: string): Buffer {
  const bytes = Buffer.from(line);
  bytes[bytes.indexOf("r1")] = 0xff;
  return bytes;
}

/**
 * A reader held against JSON.parse on `count` damaged copies of `base`: how many it took, and
 * each it took but read otherwise than `parsed` (JSON.parse's reading in the reader's terms).
 */
export function againstJsonParse<T>(
  scan: (line: Buffer) => T | undefined,
  parsed: (line: Buffer) => T | undefined,
  base: Uint8Array,
  alphabet: Uint8Array,
  seed: number,
  count = 20_000,
): { taken: number; misread: Array<{ line: string; mine: T; theirs: T | undefined }> } {
  let taken = 0;
  const misread: Array<{ line: string; mine: T; theirs: T | undefined }> = [];
  for (const line of damagedLines(base, alphabet, count, seed)) {
    const mine = scan(line);
    if (mine === undefined) continue;
    taken++;
    const theirs = parsed(line);
    if (!isDeepStrictEqual(mine, theirs))
      misread.push({ line: line.toString("latin1"), mine, theirs });
  }
  return { taken, misread };
}
