import { decodeChunkAnswers, FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { PackedPrediction } from "../inference/packed-predictions.js";
import { modelPrediction } from "../inference/prediction.js";
import { answerPlan, renderAnswers } from "./answer-plan.js";
import { answerLine, lineId } from "./batch-lines.js";

describe("a chunk's answer plan", () => {
  it("renders the lines answerLine gives each answer, predictions from their packed values", () => {
    const values = new Float32Array([0.5, -1, 2, 7, 0, 0.25]);
    const other = new Float32Array([1, 2, 3]);
    const answers = [
      { status: 200, body: new PackedPrediction(values, 3, 1, "2", 4.5) },
      { status: 400, body: { error: { message: "Expected 3 features, got 2" } } },
      { status: 200, body: new PackedPrediction(values, 3, 0, "2", 4.5) },
      { status: 200, body: new PackedPrediction(other, 3, 0, "3", 1) },
      { status: 504, body: { error: { code: new FerryError("DEADLINE_EXCEEDED", "late").code } } },
    ];
    const customIds = ["a", "b", 'c "q"', "d", "e"];
    const plan = answerPlan("batch_1", 40, "0123456789abcdef01234567", customIds, answers);
    // one run's values are carried once, however many lines read them
    expect(plan.outputs).toHaveLength(2);
    const { encoded, ok, failed } = renderAnswers(plan, modelPrediction);
    expect([ok, failed]).toEqual([3, 2]);
    const expected = answers.map(({ status, body }, k) =>
      answerLine(
        lineId("batch_1", 40 + k),
        customIds[k] ?? "",
        status,
        `req_0123456789abcdef01234567${k.toString(16).padStart(8, "0")}`,
        body,
      ),
    );
    const blocks = decodeChunkAnswers(Buffer.from(encoded));
    expect(blocks.ok.bytes.toString()).toBe([0, 2, 3].map((k) => expected[k]).join("\n"));
    expect(blocks.failed.bytes.toString()).toBe([1, 4].map((k) => expected[k]).join("\n"));
    // carried as JSON instead (rendered where the plan is made, without the thread): the same
    const here = renderAnswers(
      answerPlan("batch_1", 40, "0123456789abcdef01234567", customIds, answers, false),
    );
    expect(Buffer.from(here.encoded).equals(Buffer.from(encoded))).toBe(true);
    // a packed prediction's JSON is the predict route's answer
    expect(JSON.parse(expected[0] ?? "").response.body).toMatchObject({
      prediction: 0,
      model_version: "2",
      latency_ms: 4.5,
      source: "model",
    });
  });

  it("carries only the rows its lines read of a larger run, and renders them the same", () => {
    // a group's run of 2,048 rows, of which a chunk reads rows 100-102 (out of order)
    const width = 10;
    const values = Float32Array.from({ length: 2_048 * width }, (_, k) => Math.sin(k));
    const rows = [101, 100, 102];
    const answers = rows.map((r) => ({
      status: 200,
      body: new PackedPrediction(values, width, r, "1", 2),
    }));
    const customIds = ["x", "y", "z"];
    const plan = answerPlan("batch_2", 7, "0123456789abcdef01234567", customIds, answers);
    // what crosses to the thread: three rows, not the run's whole buffer
    expect(plan.outputs[0]?.values.buffer.byteLength).toBe(3 * width * 4);
    const carried = renderAnswers(plan, modelPrediction);
    const asJson = renderAnswers(
      answerPlan("batch_2", 7, "0123456789abcdef01234567", customIds, answers, false),
    );
    expect(Buffer.from(carried.encoded).equals(Buffer.from(asJson.encoded))).toBe(true);
  });

  it("cuts each of several runs at its own first row, lines of other answers between", () => {
    const width = 4;
    const a = Float32Array.from({ length: 500 * width }, (_, k) => Math.cos(k));
    const b = Float32Array.from({ length: 300 * width }, (_, k) => Math.sin(k) * 3);
    const answers = [
      { status: 200, body: new PackedPrediction(a, width, 410, "1", 2) },
      { status: 400, body: { error: { message: "Expected 4 features, got 2" } } },
      { status: 200, body: new PackedPrediction(b, width, 120, "2", 3) },
      { status: 200, body: new PackedPrediction(a, width, 412, "1", 2) },
      { status: 504, body: { error: { message: "late" } } },
      { status: 200, body: new PackedPrediction(b, width, 121, "2", 3) },
    ];
    const customIds = answers.map((_, k) => `id${k}`);
    const plan = answerPlan("batch_3", 0, "0123456789abcdef01234567", customIds, answers);
    expect(plan.outputs.map((o) => o.values.length)).toEqual([3 * width, 2 * width]);
    expect([...plan.row]).toEqual([0, 0, 0, 2, 0, 1]);
    const carried = renderAnswers(plan, modelPrediction);
    const asJson = renderAnswers(
      answerPlan("batch_3", 0, "0123456789abcdef01234567", customIds, answers, false),
    );
    expect(Buffer.from(carried.encoded).equals(Buffer.from(asJson.encoded))).toBe(true);
  });
});
