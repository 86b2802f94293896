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
