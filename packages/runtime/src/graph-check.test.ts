import { readFileSync } from "node:fs";
import type { TensorSpec } from "@ferry/protocol";
import { beforeAll, describe, expect, it } from "vitest";
import { classifierMismatch, generatorMismatch } from "./graph-check.js";
import type { GraphSignature, GraphTensor } from "./graph-signature.js";
import { InProcessSession } from "./in-process-session.js";
import type { LmShape } from "./lm-messages.js";

interface ShippedConfig {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  max_batch_size: number;
  architecture?: {
    n_layer: number;
    n_head: number;
    n_kv_head?: number;
    head_dim: number;
    vocab_size: number;
  };
}

const configOf = (model: string) =>
  JSON.parse(readFileSync(`models/${model}/model.json`, "utf8")) as ShippedConfig;

async function graphOf(model: string, version = "1"): Promise<GraphSignature> {
  const session = await InProcessSession.load(`models/${model}/${version}/model.onnx`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  try {
    return session.graph;
  } finally {
    await session.release();
  }
}

const shapeOf = (config: ShippedConfig): LmShape => {
  const arch = config.architecture ?? { n_layer: 0, n_head: 0, head_dim: 0, vocab_size: 0 };
  return {
    layers: arch.n_layer,
    kvHeads: arch.n_kv_head ?? arch.n_head,
    headDim: arch.head_dim,
    vocab: arch.vocab_size,
  };
};

/** `graph` with the tensors of one side passed through `edit`. */
const edited = (
  graph: GraphSignature,
  side: "inputs" | "outputs",
  edit: (tensors: GraphTensor[]) => GraphTensor[],
): GraphSignature => ({ ...graph, [side]: edit(graph[side].map((t) => ({ ...t }))) });

let mnist: GraphSignature;
let lm: GraphSignature;
beforeAll(async () => {
  [mnist, lm] = await Promise.all([graphOf("mnist"), graphOf("tiny-lm")]);
});

describe("the shipped models", () => {
  it("each model.json matches its graph, every version", async () => {
    const found: Record<string, string | undefined> = {};
    for (const [model, versions] of [
      ["digits", ["1", "2"]],
      ["mnist", ["1"]],
      ["digits-cnn", ["1"]],
    ] as const)
      for (const version of versions)
        found[`${model}/${version}`] = classifierMismatch(
          configOf(model),
          await graphOf(model, version),
          `${model}/${version}/model.onnx`,
        );
    const tiny = configOf("tiny-lm");
    found["tiny-lm/1"] = generatorMismatch(tiny, shapeOf(tiny), lm, "tiny-lm/1/model.onnx");
    const qwen = configOf("examples/qwen-tiny");
    const qwenGraph = await graphOf("examples/qwen-tiny");
    found["qwen-tiny/1"] = generatorMismatch(
      qwen,
      shapeOf(qwen),
      qwenGraph,
      "qwen-tiny/1/model.onnx",
    );
    expect(Object.entries(found).filter(([, mismatch]) => mismatch !== undefined)).toEqual([]);
  });
});

describe("a classifier's model.json against its graph", () => {
  const config = () => configOf("mnist");
  const check = (patch: Partial<ShippedConfig>, graph = mnist) =>
    classifierMismatch({ ...config(), ...patch }, graph, "mnist/1/model.onnx");

  it("an input the graph lacks: named, with the graph's own inputs", () => {
    expect(check({ inputs: [{ name: "pixels", datatype: "FP32", dims: [784] }] })).toBe(
      "model.json input 'pixels' is not in mnist/1/model.onnx (its inputs: 'input' float32[-1,784])",
    );
  });

  it("an output the graph lacks", () => {
    expect(check({ outputs: [{ name: "scores", datatype: "FP32", dims: [10] }] })).toBe(
      "model.json output 'scores' is not in mnist/1/model.onnx (its outputs: 'logits' float32[-1,10])",
    );
  });

  it("another datatype", () => {
    expect(check({ inputs: [{ name: "input", datatype: "FP64", dims: [784] }] })).toBe(
      "model.json input 'input' is FP64 (float64), but mnist/1/model.onnx has 'input' float32[-1,784]",
    );
    expect(check({ outputs: [{ name: "logits", datatype: "INT64", dims: [10] }] })).toMatch(
      /^model.json output 'logits' is INT64 \(int64\), but .* 'logits' float32\[-1,10\]$/,
    );
  });

  it("another rank", () => {
    expect(check({ inputs: [{ name: "input", datatype: "FP32", dims: [28, 28] }] })).toBe(
      "model.json input 'input' has dims [28,28] (rank 3 with the batch axis), but mnist/1/model.onnx has 'input' float32[-1,784] (rank 2)",
    );
  });

  it("another width, or a variable input axis the graph fixes; an output's open axis is fine", () => {
    expect(check({ inputs: [{ name: "input", datatype: "FP32", dims: [64] }] })).toBe(
      "model.json input 'input' has dims [64], but mnist/1/model.onnx has 'input' float32[-1,784]",
    );
    expect(check({ inputs: [{ name: "input", datatype: "FP32", dims: [-1] }] })).toMatch(
      /input 'input' has dims \[-1\]/,
    );
    expect(check({ outputs: [{ name: "logits", datatype: "FP32", dims: [12] }] })).toMatch(
      /output 'logits' has dims \[12\], but .*float32\[-1,10\]/,
    );
    expect(check({ outputs: [{ name: "logits", datatype: "FP32", dims: [-1] }] })).toBeUndefined();
  });

  it("a graph input model.json does not name, which would never be fed", () => {
    const graph = edited(mnist, "inputs", (inputs) => [
      ...inputs,
      { name: "mask", type: "bool", shape: [-1, 784] },
    ]);
    expect(check({}, graph)).toBe(
      "mnist/1/model.onnx input 'mask' bool[-1,784] is not in model.json's inputs, so it would never be fed",
    );
  });

  it("a graph exported with a fixed batch axis", () => {
    const graph = edited(mnist, "inputs", () => [
      { name: "input", type: "float32", shape: [1, 784] },
    ]);
    expect(check({}, graph)).toBe(
      "mnist/1/model.onnx input 'input' float32[1,784] has a fixed batch axis; max_batch_size 32 needs its first axis variable (a dynamic axis at export)",
    );
    // a batch of one row at most is all such a graph runs, and all it is given
    expect(check({ max_batch_size: 1 }, graph)).toBeUndefined();
  });

  it("a graph that states no shape is checked by name and type only", () => {
    const graph = edited(mnist, "inputs", () => [
      { name: "input", type: "float32", shape: undefined },
    ]);
    expect(check({}, graph)).toBeUndefined();
  });
});

describe("a generator's model.json and architecture against its graph's KV layout", () => {
  const config = configOf("tiny-lm");
  const shape = shapeOf(config);
  const check = (patch: Partial<LmShape>, graph = lm) =>
    generatorMismatch(config, { ...shape, ...patch }, graph, "tiny-lm/1/model.onnx");

  it("too few layers: the graph has a KV input past them", () => {
    expect(check({ layers: 3 })).toBe(
      "tiny-lm/1/model.onnx input 'past_key_values.3.key' is a KV cache layer past architecture.n_layer 3: the graph has more layers than model.json says",
    );
  });

  it("too many layers: a KV input the graph lacks", () => {
    expect(check({ layers: 5 })).toMatch(
      /^tiny-lm\/1\/model.onnx has no input 'past_key_values.4.key' \(Optimum's naming for architecture.n_layer 5: .*; its inputs: 'input_ids' int64\[-1,-1\], .* and 5 more\)$/,
    );
  });

  it("another head count or head size", () => {
    expect(check({ kvHeads: 8 })).toBe(
      "tiny-lm/1/model.onnx input 'past_key_values.0.key' float32[-1,4,-1,32] has 4 KV heads, but architecture.n_kv_head (else n_head) says 8",
    );
    expect(check({ headDim: 16 })).toBe(
      "tiny-lm/1/model.onnx input 'past_key_values.0.key' float32[-1,4,-1,32] has heads of 32, but architecture.head_dim says 16",
    );
  });

  it("grouped-query attention: the cache has n_kv_head heads, not n_head", async () => {
    const qwen = configOf("examples/qwen-tiny");
    const graph = await graphOf("examples/qwen-tiny");
    const file = "qwen-tiny/1/model.onnx";
    expect(generatorMismatch(qwen, shapeOf(qwen), graph, file)).toBeUndefined();
    const { n_kv_head: _, ...withoutKv } = qwen.architecture ?? {
      n_layer: 0,
      n_head: 0,
      head_dim: 0,
      vocab_size: 0,
    };
    expect(
      generatorMismatch(qwen, shapeOf({ ...qwen, architecture: withoutKv }), graph, file),
    ).toBe(
      "qwen-tiny/1/model.onnx input 'past_key_values.0.key' float32[-1,2,-1,8] has 2 KV heads, but architecture.n_kv_head (else n_head) says 4",
    );
  });

  it("another vocabulary", () => {
    expect(check({ vocab: 300 })).toBe(
      "tiny-lm/1/model.onnx output 'logits' float32[-1,-1,257] scores 257 tokens, but architecture.vocab_size says 300",
    );
  });

  it("a KV cache in another dtype or rank", () => {
    const half = edited(lm, "inputs", (inputs) =>
      inputs.map((t) => (t.name.startsWith("past_") ? { ...t, type: "float16" } : t)),
    );
    expect(check({}, half)).toBe(
      "tiny-lm/1/model.onnx input 'past_key_values.0.key' float16[-1,4,-1,32] is not float32, as the worker keeps its KV cache",
    );
    const fused = edited(lm, "outputs", (outputs) =>
      outputs.map((t) => (t.name === "present.2.value" ? { ...t, shape: [-1, -1, 128] } : t)),
    );
    expect(check({}, fused)).toBe(
      "tiny-lm/1/model.onnx output 'present.2.value' float32[-1,-1,128] is not [batch, heads, sequence, head_dim] (rank 4)",
    );
  });

  it("an output the worker reads is missing", () => {
    const graph = edited(lm, "outputs", (outputs) =>
      outputs.filter((t) => t.name !== "present.1.value"),
    );
    expect(check({}, graph)).toMatch(
      /^tiny-lm\/1\/model.onnx has no output 'present.1.value' \(Optimum's naming: logits, present.0..3.key\|value; its outputs: 'logits'/,
    );
  });

  it("a token input the worker feeds is missing, or one it does not feed is there", () => {
    // the layout's own check, past what tiny-lm's model.json declares
    const layout = (graph: GraphSignature) =>
      generatorMismatch({ inputs: [], outputs: [] }, shape, graph, "tiny-lm/1/model.onnx");
    const noPositions = edited(lm, "inputs", (inputs) =>
      inputs.filter((t) => t.name !== "position_ids"),
    );
    expect(layout(noPositions)).toMatch(
      /^tiny-lm\/1\/model.onnx has no input 'position_ids' \(Optimum's naming/,
    );
    const extra = edited(lm, "inputs", (inputs) => [
      ...inputs,
      { name: "token_type_ids", type: "int64", shape: [-1, -1] },
    ]);
    expect(layout(extra)).toMatch(
      /^tiny-lm\/1\/model.onnx input 'token_type_ids' int64\[-1,-1\] is not one the worker feeds a generator /,
    );
    const int32 = edited(lm, "inputs", (inputs) =>
      inputs.map((t) => (t.name === "input_ids" ? { ...t, type: "int32" } : t)),
    );
    expect(layout(int32)).toBe(
      "tiny-lm/1/model.onnx input 'input_ids' int32[-1,-1] is not int64, which the worker feeds",
    );
  });

  it("model.json's own tensors are checked too", () => {
    const wrong = {
      ...config,
      inputs: [{ name: "input", datatype: "INT64" as const, dims: [-1] }],
    };
    expect(generatorMismatch(wrong, shape, lm, "tiny-lm/1/model.onnx")).toMatch(
      /^model.json input 'input' is not in tiny-lm\/1\/model.onnx \(its inputs: 'input_ids' int64\[-1,-1\], /,
    );
  });
});
