import { describe, expect, it } from "vitest";
import { modelConfigSchema } from "./model-config.js";

const base = {
  name: "m",
  kind: "classifier",
  inputs: [{ name: "input", datatype: "FP32", dims: [4] }],
  outputs: [{ name: "logits", datatype: "FP32", dims: [2] }],
};

describe("model.json inline", () => {
  it("is off unless asked for: batches run on instance threads", () => {
    expect(modelConfigSchema.parse(base).inline).toBe(false);
  });

  it("runs one instance, so it refuses an instance_count above one", () => {
    expect(modelConfigSchema.parse({ ...base, inline: true }).inline).toBe(true);
    const refused = modelConfigSchema.safeParse({ ...base, inline: true, instance_count: 2 });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(["inline"]);
  });
});

describe("model.json of an embedder", () => {
  const embedder = {
    name: "e",
    kind: "embedder",
    inputs: [
      { name: "input_ids", datatype: "INT64", dims: [-1] },
      { name: "attention_mask", datatype: "INT64", dims: [-1] },
    ],
    outputs: [{ name: "last_hidden_state", datatype: "FP32", dims: [-1, 128] }],
    tokenizer: { type: "huggingface" },
    embedding: { pooling: "mean", max_tokens: 128 },
  };
  const issues = (patch: Record<string, unknown>) =>
    modelConfigSchema.safeParse({ ...embedder, ...patch }).error?.issues.map((i) => i.message);

  it("takes its pooling and max_tokens; budgets default to OpenAI's and TEI's", () => {
    expect(modelConfigSchema.parse(embedder).embedding).toEqual({
      pooling: "mean",
      normalize: true,
      max_tokens: 128,
      max_batch_tokens: 16_384,
      max_inputs: 2048,
      max_request_tokens: 300_000,
    });
  });

  it("needs its embedding block, its tokenizer and a fixed hidden width", () => {
    expect(issues({ embedding: undefined })).toEqual([
      "an embedder needs its pooling and max_tokens",
    ]);
    expect(issues({ tokenizer: undefined })).toEqual(["an embedder needs its tokenizer"]);
    expect(
      issues({ outputs: [{ name: "last_hidden_state", datatype: "FP32", dims: [-1, -1] }] }),
    ).toEqual(["an embedder's output ends with its hidden width, a fixed number"]);
  });

  it("refuses widths past the hidden one, and a max_tokens no batch could hold", () => {
    expect(
      issues({ embedding: { pooling: "cls", max_tokens: 128, matryoshka_dimensions: [64, 256] } }),
    ).toEqual(["dimensions of 256 are wider than the hidden width 128"]);
    expect(
      issues({ embedding: { pooling: "cls", max_tokens: 512, max_batch_tokens: 256 } }),
    ).toEqual([
      "max_tokens must be at most max_batch_tokens: a longest input must fit a batch alone",
    ]);
  });
});
