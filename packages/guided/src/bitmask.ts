/** A set of token ids as a bitmask, one bit each (XGrammar's layout): 150,000 tokens in 19 KB. */
export function bitmaskOf(ids: Iterable<number>, size: number): Uint32Array {
  const words = new Uint32Array(Math.ceil(size / 32));
  for (const id of ids)
    if (id >= 0 && id < size) words[id >>> 5] = (words[id >>> 5] ?? 0) | (1 << (id & 31));
  return words;
}

/** Every logit whose bit is not set to minus infinity (and every logit past the mask). */
export function keepMasked(words: Uint32Array, logits: Float32Array): void {
  const size = Math.min(logits.length, words.length * 32);
  for (let w = 0; w * 32 < size; w++) {
    const word = words[w] ?? 0;
    if (word === 0xffffffff) continue;
    const end = Math.min(size, w * 32 + 32);
    if (word === 0) logits.fill(Number.NEGATIVE_INFINITY, w * 32, end);
    else
      for (let id = w * 32; id < end; id++)
        if (((word >>> (id & 31)) & 1) === 0) logits[id] = Number.NEGATIVE_INFINITY;
  }
  if (logits.length > size) logits.fill(Number.NEGATIVE_INFINITY, size);
}
