import { describe, expect, it } from "vitest";
import { sample, seededRandom } from "./sampler.js";

const logits = Float32Array.from([1, 3, 2, 0.5]);

describe("sample", () => {
  it("is greedy at temperature 0", () => {
    expect(sample(logits, { temperature: 0, top_k: 0, top_p: 1 }, Math.random)).toBe(1);
  });

  it("gives the same draws for the same seed", () => {
    const draw = (seed: number) => {
      const rng = seededRandom(seed);
      return Array.from({ length: 20 }, () =>
        sample(logits, { temperature: 1, top_k: 0, top_p: 1 }, rng),
      );
    };
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
    // seeds equal in their low 32 bits are other seeds
    expect(draw(0)).not.toEqual(draw(2 ** 32));
    expect(draw(123)).not.toEqual(draw(2 ** 40 + 123));
    expect(draw(-1)).not.toEqual(draw(2 ** 32 - 1));
    // (and none mixed down to 32 bits of state: 2^32 + 0x45d9f3b had drawn as 0)
    expect(draw(0)).not.toEqual(draw(4_368_211_771));
    expect(draw(2 ** 40 + 123)).toEqual(draw(2 ** 40 + 123));
  });

  it("never draws a barred token from the top-k, even on a draw at the very top of the range", () => {
    // two allowed, the rest barred (a mask): top_k 4 ranks barred ones in; a draw of almost 1
    // left a rounding sliver, and the last ranked place (barred) had been returned
    const masked = Float32Array.from([-Infinity, 3, 2, -Infinity, -Infinity]);
    // (a draw of 1 reaches the fallback for certain, as rounding does at random)
    for (const draw of [() => 1 - Number.EPSILON, () => 1])
      expect([1, 2]).toContain(sample(masked, { temperature: 1, top_k: 4, top_p: 1 }, draw));
  });

  it("never leaves the top-k or the top-p nucleus", () => {
    const rng = seededRandom(1);
    for (let i = 0; i < 200; i++) {
      expect([1, 2]).toContain(sample(logits, { temperature: 1, top_k: 2, top_p: 1 }, rng));
      expect(sample(logits, { temperature: 1, top_k: 0, top_p: 0.5 }, rng)).toBe(1);
    }
  });

  it("draws each token as often as its softmax probability says, with and without top-k", () => {
    const wide = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i) * 2);
    const softmax = (ids: number[], t: number) => {
      const w = ids.map((i) => Math.exp((wide[i] ?? 0) / t));
      const z = w.reduce((a, b) => a + b, 0);
      return new Map(ids.map((id, j) => [id, (w[j] ?? 0) / z]));
    };
    const all = Array.from(wide.keys());
    const top5 = [...all].sort((a, b) => (wide[b] ?? 0) - (wide[a] ?? 0)).slice(0, 5);
    for (const [topK, support] of [
      [0, all],
      [5, top5],
    ] as const) {
      const expected = softmax([...support], 0.8);
      const rng = seededRandom(42);
      const counts = new Map<number, number>();
      const n = 40_000;
      for (let i = 0; i < n; i++) {
        const id = sample(wide, { temperature: 0.8, top_k: topK, top_p: 1 }, rng);
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      for (const id of counts.keys()) expect(expected.has(id)).toBe(true);
      for (const [id, p] of expected) {
        const seen = (counts.get(id) ?? 0) / n;
        // four standard deviations of a binomial proportion
        expect(Math.abs(seen - p)).toBeLessThan(4 * Math.sqrt((p * (1 - p)) / n) + 1e-4);
      }
    }
  });

  it("never draws a token under min_p times the likeliest one's probability", () => {
    // at temperature 1 the probabilities relative to token 1's are e^-2, e^-1, 1, e^-2.5
    const rng = seededRandom(3);
    const drawn = new Set<number>();
    for (const topK of [0, 3])
      for (let i = 0; i < 2_000; i++)
        drawn.add(sample(logits, { temperature: 1, top_k: topK, top_p: 1, min_p: 0.3 }, rng));
    expect([...drawn].sort()).toEqual([1, 2]);
  });
});
