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
  });

  it("never leaves the top-k or the top-p nucleus", () => {
    const rng = seededRandom(1);
    for (let i = 0; i < 200; i++) {
      expect([1, 2]).toContain(sample(logits, { temperature: 1, top_k: 2, top_p: 1 }, rng));
      expect(sample(logits, { temperature: 1, top_k: 0, top_p: 0.5 }, rng)).toBe(1);
    }
  });
});
