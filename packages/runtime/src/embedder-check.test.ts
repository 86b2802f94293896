import { readFileSync } from "node:fs";
import type { TensorSpec } from "@ferry/protocol";
import { beforeAll, describe, expect, it } from "vitest";
import { embedderMismatch } from "./embedder-check.js";
import type { GraphSignature, GraphTensor } from "./graph-signature.js";
import { InProcessSession } from "./in-process-session.js";

interface Declared {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  max_batch_size: number;
}

const FILE = "bert-fortunes/1/model.onnx";
const config = () =>
  JSON.parse(readFileSync("models/bert-fortunes/model.json", "utf8")) as Declared;

let graph: GraphSignature;
beforeAll(async () => {
  const session = await InProcessSession.load(`models/${FILE}`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  graph = session.graph;
  await session.release();
});

const check = (patch: Partial<Declared> = {}, g: GraphSignature = graph) =>
  embedderMismatch({ ...config(), ...patch }, g, FILE);

/** The graph with one side's tensors passed through `edit`. */
const edited = (side: "inputs" | "outputs", edit: (t: GraphTensor[]) => GraphTensor[]) => ({
  ...graph,
  [side]: edit(graph[side].map((t) => ({ ...t }))),
});
const tensor = (name: string, type: string, shape: number[] | undefined): GraphTensor => ({
  name,
  type,
  shape,
});

describe("an embedder's model.json against its graph", () => {
  it("the shipped bert-fortunes matches", () => {
    expect(check()).toBeUndefined();
  });

  it("a graph without attention_mask is refused, naming what the worker feeds", () => {
    const g = edited("inputs", (t) => t.filter((x) => x.name !== "attention_mask"));
    expect(check({ inputs: config().inputs.filter((s) => s.name !== "attention_mask") }, g)).toBe(
      `${FILE} has no input 'attention_mask' (an embedder is fed input_ids, attention_mask and, where the graph has it, token_type_ids; its inputs: 'input_ids' int64[-1,-1], 'token_type_ids' int64[-1,-1])`,
    );
  });

  it("token_type_ids is optional: a graph without it is fed the other two", () => {
    const g = edited("inputs", (t) => t.filter((x) => x.name !== "token_type_ids"));
    expect(check({ inputs: config().inputs.filter((s) => s.name !== "token_type_ids") }, g)).toBe(
      undefined,
    );
  });

  it("an input the worker would never feed is refused", () => {
    const g = edited("inputs", (t) => [...t, tensor("position_ids", "int64", [-1, -1])]);
    expect(check({}, g)).toBe(
      `${FILE} input 'position_ids' int64[-1,-1] is not one the worker feeds an embedder (input_ids, attention_mask, token_type_ids)`,
    );
  });

  it("token inputs must be int64 [batch, sequence], both axes variable", () => {
    const int32 = edited("inputs", (t) =>
      t.map((x) => (x.name === "input_ids" ? { ...x, type: "int32" } : x)),
    );
    expect(check({ inputs: [] }, int32)).toBe(
      `${FILE} input 'input_ids' int32[-1,-1] is not int64, which the worker feeds`,
    );
    const fixed = edited("inputs", (t) =>
      t.map((x) => (x.name === "attention_mask" ? { ...x, shape: [-1, 128] } : x)),
    );
    expect(check({ inputs: [] }, fixed)).toMatch(
      /attention_mask' int64\[-1,128\] has a fixed sequence axis/,
    );
  });

  it("the output must be hidden states or pooled vectors of model.json's width", () => {
    const narrow = {
      outputs: [{ name: "last_hidden_state", datatype: "FP32" as const, dims: [-1, 64] }],
    };
    expect(check(narrow)).toBe(
      `model.json output 'last_hidden_state' has dims [-1,64], but ${FILE} has 'last_hidden_state' float32[-1,-1,128]`,
    );
    const rank4 = edited("outputs", () => [
      tensor("last_hidden_state", "float32", [-1, -1, 2, 128]),
    ]);
    expect(
      check(
        { outputs: [{ name: "last_hidden_state", datatype: "FP32", dims: [-1, 2, 128] }] },
        rank4,
      ),
    ).toBe(
      `${FILE} output 'last_hidden_state' float32[-1,-1,2,128] is neither hidden states [batch, sequence, hidden] (rank 3) nor pooled [batch, hidden] (rank 2)`,
    );
    const pooled = edited("outputs", () => [tensor("sentence_embedding", "float32", [-1, 128])]);
    expect(
      check({ outputs: [{ name: "sentence_embedding", datatype: "FP32", dims: [128] }] }, pooled),
    ).toBeUndefined();
  });
});
