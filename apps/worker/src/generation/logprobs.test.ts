import { ByteTokenizer } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { tokenLogprob } from "./logprobs.js";

describe("tokenLogprob", () => {
  const tokenizer = new ByteTokenizer(256);

  it("is the log-softmax of the token's logit over the whole vocabulary", () => {
    const logits = Float32Array.from([0, Math.log(3), 0, 0]);
    const lp = tokenLogprob(logits, 0, 0, tokenizer);
    expect(lp.logprob).toBeCloseTo(Math.log(1 / 6), 6);
    expect(lp.top).toEqual([]);
    expect(lp.token).toBe("\u0000");
  });

  it("lists the k likeliest tokens, likeliest first, each with its text and log probability", () => {
    const logits = Float32Array.from({ length: 256 }, (_, i) => (i === 65 ? 5 : i === 66 ? 4 : 0));
    const lp = tokenLogprob(logits, 67, 2, tokenizer);
    expect(lp.top.map((t) => t.token)).toEqual(["A", "B"]);
    expect(lp.top[0]?.bytes).toEqual([65]);
    expect(Math.exp(lp.top[0]?.logprob ?? 0) + Math.exp(lp.top[1]?.logprob ?? 0)).toBeLessThan(1);
    expect(lp.top[0]?.logprob ?? 0).toBeGreaterThan(lp.logprob);
  });
});
