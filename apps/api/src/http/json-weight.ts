import { FerryError } from "@ferry/protocol";

/**
 * What parsing one JSON object or list costs the loop, in bytes of plain JSON: JSON.parse reads
 * numbers and strings at ~3-7 ns a byte but makes an object or a list in ~200-370 ns with its
 * garbage (Node 20: 8 MB of numbers 50 ms, of `{}` ~1 s). A body priced by its bytes alone
 * had cost ~50x what it was charged: `/v1/jobs` with 8 MB of `{}` in a field no schema reads
 * held the loop ~1.6 s, a neighbour's p50 2.2 ms -> 1.8 s (attack).
 */
export const BYTES_PER_CONTAINER = 48;

/**
 * A JSON body's weight: its bytes (a decoded body's characters), and `BYTES_PER_CONTAINER` for
 * each object and list it would make; undefined once the weight is past `most`, which is found
 * without reading on. The `{` and `[` of the whole body are counted first (memchr's speed);
 * strings are told apart (a prompt of code is not refused for its braces) only where that
 * count would refuse the body or more than double its weight, so that a weight is exact where
 * it refuses and otherwise at most twice the bytes of braces in strings (a numeric body, the
 * common large one, is never read twice).
 */
export function jsonWeight(body: Uint8Array | string, most: number): number | undefined {
  const length = typeof body === "string" ? body.length : body.byteLength;
  const room = Math.floor((most - length) / BYTES_PER_CONTAINER);
  if (room < 0) return undefined;
  let count = bracketsUpTo(body, room + 1);
  if (count > room || count * BYTES_PER_CONTAINER > length)
    count = containersUpTo(body, room + 1);
  return count > room ? undefined : length + count * BYTES_PER_CONTAINER;
}

/** The 413 of a body past its weight: `most` is the route's largest body. */
export function tooHeavy(most: number): FerryError {
  return new FerryError(
    "PAYLOAD_TOO_LARGE",
    `Request body holds more JSON objects and lists than its route's largest body (${most} bytes) costs to read: each costs what ${BYTES_PER_CONTAINER} bytes of numbers do, so at most ${Math.floor(most / BYTES_PER_CONTAINER)} in a body`,
  );
}

/** `{` and `[` wherever they are, up to `most`. */
function bracketsUpTo(body: Uint8Array | string, most: number): number {
  const text =
    typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let count = 0;
  for (const bracket of BRACKETS)
    for (let at = text.indexOf(bracket); at !== -1; at = text.indexOf(bracket, at + 1))
      if (++count >= most) return count;
  return count;
}

const BRACKETS = ["{", "["] as const;

/**
 * The `{` and `[` of a JSON text outside its strings (the objects and lists it makes), up to
 * `most`: of its bytes or, decoded, its characters (the same for every byte that matters here).
 */
export function containersUpTo(body: Uint8Array | string, most = Number.POSITIVE_INFINITY): number {
  return typeof body === "string" ? charsUpTo(body, most) : bytesUpTo(body, most);
}

// two loops, each of one type: one loop over both read either type ~3x slower

function bytesUpTo(bytes: Uint8Array, most: number): number {
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

function charsUpTo(text: string, most: number): number {
  let count = 0;
  let inString = false;
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (inString) {
      if (c === 0x5c) k++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if ((c === 0x7b || c === 0x5b) && ++count >= most) return count;
  }
  return count;
}
