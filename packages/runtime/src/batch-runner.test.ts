import { afterAll, describe, expect, it } from "vitest";
import { type BatchRunner, loadBatchRunner } from "./batch-runner.js";
import type { TensorMap } from "./tensor.js";

const PATH = "models/digits/2/model.onnx";
const runners: BatchRunner[] = [];
afterAll(() => Promise.all(runners.map((r) => r.close())));

/** `rows` digits rows (64 pixels each) whose first pixel is `seed`. */
const batch = (rows: number, seed: number): TensorMap => {
  const data = new Float32Array(rows * 64).fill(1);
  for (let r = 0; r < rows; r++) data[r * 64] = seed + r;
  return { input: { data, dims: [rows, 64] } };
};
const broken = (): TensorMap => ({ input: { data: new Float32Array(10), dims: [1, 10] } });

describe.each([false, true])("BatchRunner.runMany (inline: %s)", (inline) => {
  it("runs each batch as run would, and a batch the model refuses fails alone", async () => {
    const runner = await loadBatchRunner(PATH, {
      inline,
      instances: 1,
      intraOpThreads: 1,
      executionProvider: "cpu",
    });
    runners.push(runner);
    const alone = [await runner.run(batch(3, 0)), await runner.run(batch(2, 7))];
    const outcomes = await runner.runMany([batch(3, 0), broken(), batch(2, 7)]);
    expect(outcomes).toHaveLength(3);
    expect(outcomes[1]).toBeInstanceOf(Error);
    for (const [k, at] of [0, 2].entries()) {
      const got = outcomes[at] as TensorMap;
      const want = alone[k] as TensorMap;
      const name = Object.keys(want)[0] as string;
      expect(got[name]?.dims).toEqual(want[name]?.dims);
      expect([...(got[name]?.data ?? [])]).toEqual([...(want[name]?.data ?? [])]);
    }
  });
});
