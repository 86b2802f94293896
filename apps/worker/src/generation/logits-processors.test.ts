import { bitmaskOf } from "@ferry/guided/engine";
import { describe, expect, it } from "vitest";
import { badWordIds, changesLogits, processLogits } from "./logits-processors.js";

const history = (output: number[], promptIds: number[] = []) => {
  const outputCounts = new Map<number, number>();
  for (const id of output) outputCounts.set(id, (outputCounts.get(id) ?? 0) + 1);
  return { outputCounts, promptIds, generated: output };
};

describe("processLogits", () => {
  it("bad_words: a word's last token is barred once the completion ends with the rest of it", () => {
    const word = [[5, 6, 7], [2]];
    const barred = (generated: number[]) => {
      const logits = new Float32Array(8);
      processLogits(logits, {}, { ...history(generated), badWordIds: word });
      return [...logits.keys()].filter((id) => logits[id] === Number.NEGATIVE_INFINITY);
    };
    expect(barred([])).toEqual([2]);
    expect(barred([5])).toEqual([2]);
    expect(barred([1, 5, 6])).toEqual([2, 7]);
    expect(barred([5, 6, 1])).toEqual([2]);
    expect(changesLogits({}, { ...history([]), badWordIds: word })).toBe(true);
  });

  it("bad_words as ids: the word alone, and with a leading space where that is another word", () => {
    const bytes = { encode: (t: string) => [...Buffer.from(t)] };
    expect(badWordIds(["  hi"], bytes)).toEqual([[104, 105]]);
    // a tokenizer whose words carry their space
    const words: Record<string, number[]> = { hi: [1], " hi": [2], ok: [3, 4], " ok": [5, 4] };
    const spaced = { encode: (t: string) => words[t] ?? [] };
    expect(badWordIds(["hi", "ok", ""], spaced)).toEqual([[1], [2], [3, 4], [5, 4]]);
  });

  it("allowed_token_ids: every other token to minus infinity, before the bias (vLLM's order)", () => {
    const logits = Float32Array.from([1, 2, 3, 4]);
    const params = { allowed_token_ids: [3, 1], logit_bias: { "0": 50, "1": 1 } };
    expect(changesLogits({ allowed_token_ids: [3] }, history([]))).toBe(true);
    processLogits(logits, params, history([]));
    expect([...logits]).toEqual([Number.NEGATIVE_INFINITY, 3, Number.NEGATIVE_INFINITY, 4]);
  });

  it("allowed_token_ids as the sequence's bitmask, built once: the same logits as the list", () => {
    const logits = Float32Array.from({ length: 40 }, (_, i) => i);
    const ids = [33, 1, 33, 1, 39];
    processLogits(
      logits,
      { allowed_token_ids: ids },
      { ...history([]), allowed: bitmaskOf(ids, 40) },
    );
    const kept = [...logits].flatMap((v, i) => (v === Number.NEGATIVE_INFINITY ? [] : [i]));
    expect(kept).toEqual([1, 33, 39]);
  });

  it("reads MAX_LOGIT_BIAS entries of logit_bias at most, whoever sent more (an older API)", () => {
    const logits = new Float32Array(4);
    // 61,000 spellings of token 1, as an API before the cap passed them on
    const bias: Record<string, number> = {};
    for (let k = 0; k < 61_000; k++) bias[`${"0".repeat(k % 300)}${k < 300 ? 1 : 2}`] = 1;
    processLogits(logits, { logit_bias: bias }, history([]));
    // 300 entries read (which ones is the object's order), each adding 1
    expect(logits.reduce((a, b) => a + b, 0)).toBe(300);
  });

  it("adds logit_bias, ignoring ids past the vocabulary", () => {
    const logits = Float32Array.from([1, 2, 3]);
    processLogits(logits, { logit_bias: { "0": 5, "2": -100, "9": 1 } }, history([]));
    expect([...logits]).toEqual([6, 2, -97]);
  });

  it("divides a positive logit by the repetition penalty and multiplies a negative one, for prompt and completion tokens", () => {
    const logits = Float32Array.from([4, -4, 4, -4]);
    processLogits(logits, { repetition_penalty: 2 }, history([1], [0]));
    expect([...logits]).toEqual([2, -8, 4, -4]);
  });

  it("subtracts frequency per appearance and presence once, over completion tokens only", () => {
    const logits = Float32Array.from([0, 0, 0, 0]);
    processLogits(
      logits,
      { frequency_penalty: 0.5, presence_penalty: 1 },
      history([1, 1, 1, 2], [3]),
    );
    expect([...logits]).toEqual([0, -2.5, -1.5, 0]);
  });

  it("bans the end of text and stop tokens until min_tokens are made", () => {
    const params = { min_tokens: 2, stop_token_ids: [1] };
    const before = Float32Array.from([1, 2, 3, 4]);
    processLogits(before, params, history([0]), 3);
    expect([...before]).toEqual([1, -Infinity, 3, -Infinity]);
    expect(changesLogits(params, history([0, 0]))).toBe(false);
  });

  it("is skipped when nothing is asked for", () => {
    const none = history([]);
    expect(changesLogits({}, none)).toBe(false);
    expect(
      changesLogits({ logit_bias: {}, repetition_penalty: 1, frequency_penalty: 0 }, none),
    ).toBe(false);
    expect(changesLogits({ presence_penalty: 0.1 }, none)).toBe(true);
  });
});
