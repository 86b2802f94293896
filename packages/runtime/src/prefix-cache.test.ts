import { describe, expect, it } from "vitest";
import { PREFIX_BLOCK, PrefixCache } from "./prefix-cache.js";

const shape = { layers: 1, kvHeads: 2, headDim: 3, vocab: 10 };

/** A [heads, len, d] tensor whose every value names its head and position: h * 1000 + position. */
function tensorOf(len: number): Float32Array {
  const { kvHeads: heads, headDim: d } = shape;
  const t = new Float32Array(heads * len * d);
  for (let h = 0; h < heads; h++)
    for (let p = 0; p < len; p++) t.fill(h * 1000 + p, (h * len + p) * d, (h * len + p + 1) * d);
  return t;
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe("PrefixCache", () => {
  it("gives the longest kept prefix in whole blocks, always leaving a token to read, its positions cut out", () => {
    const cache = new PrefixCache(shape, 1 << 20);
    const prompt = range(3 * PREFIX_BLOCK + 5);
    cache.keep(prompt, [tensorOf(prompt.length), tensorOf(prompt.length)], prompt.length);
    // the same prompt again: three blocks (the fourth is not whole)
    const hit = cache.take(prompt);
    expect(hit?.len).toBe(3 * PREFIX_BLOCK);
    expect(hit?.tensors).toEqual([tensorOf(3 * PREFIX_BLOCK), tensorOf(3 * PREFIX_BLOCK)]);
    // a prompt that goes another way within block 2: one block
    const other = [...range(PREFIX_BLOCK + 3), 99, ...range(40)];
    expect(cache.take(other)?.len).toBe(PREFIX_BLOCK);
    // exactly the kept blocks: one token must be left to read, so a block fewer
    expect(cache.take(range(2 * PREFIX_BLOCK))?.len).toBe(PREFIX_BLOCK);
    expect(cache.take(range(PREFIX_BLOCK))).toBeUndefined();
    expect(cache.take([1, ...range(60)])).toBeUndefined();
    // what it gives is a copy: changing it changes nothing kept
    hit?.tensors[0]?.fill(-1);
    expect(cache.take(prompt)?.tensors[0]).toEqual(tensorOf(3 * PREFIX_BLOCK));
  });

  it("a longer prompt supersedes the shorter one it goes on from; the least recently used go past the budget", () => {
    const bytesOf = (blocks: number) =>
      2 * shape.kvHeads * blocks * PREFIX_BLOCK * shape.headDim * 4 + blocks * PREFIX_BLOCK * 4;
    const cache = new PrefixCache(shape, bytesOf(2) + bytesOf(1));
    const keep = (tokens: number[]) =>
      cache.keep(tokens, [tensorOf(tokens.length), tensorOf(tokens.length)], tokens.length);
    keep(range(PREFIX_BLOCK + 1));
    keep(range(2 * PREFIX_BLOCK + 1));
    expect(cache.size.prompts).toBe(1);
    expect(cache.take(range(40))?.len).toBe(2 * PREFIX_BLOCK);
    keep(range(PREFIX_BLOCK + 1, 500));
    expect(cache.size.prompts).toBe(2);
    // touching the first makes the second the least recently used
    cache.take(range(40));
    keep(range(PREFIX_BLOCK + 1, 900));
    expect(cache.take(range(PREFIX_BLOCK + 1, 500))).toBeUndefined();
    expect(cache.take(range(40))?.len).toBe(2 * PREFIX_BLOCK);
    expect(cache.size.bytes).toBeLessThanOrEqual(bytesOf(2) + bytesOf(1));
  });

  it("hands the other thread copies of what it kept itself since it last did, not what that thread handed it", () => {
    const cache = new PrefixCache(shape, 1 << 20);
    const keep = (tokens: number[], fromPeer = false) =>
      cache.keep(tokens, [tensorOf(tokens.length), tensorOf(tokens.length)], tokens.length, {
        fromPeer,
      });
    expect(keep(range(PREFIX_BLOCK + 3))).toBe(true);
    expect(keep(range(PREFIX_BLOCK + 3))).toBe(false);
    expect(keep(range(2 * PREFIX_BLOCK, 700), true)).toBe(true);
    const fresh = cache.takeFresh();
    expect(fresh.map((f) => [f.tokens.length, f.len])).toEqual([[PREFIX_BLOCK, PREFIX_BLOCK]]);
    expect(fresh[0]?.tensors).toEqual([tensorOf(PREFIX_BLOCK), tensorOf(PREFIX_BLOCK)]);
    expect(cache.takeFresh()).toEqual([]);
  });
});
