import { describe, expect, it } from "vitest";
import { AnswerRecorder } from "./answer-recorder.js";

describe("AnswerRecorder", () => {
  it("keeps the lines of one turn in one call, each settling once its call is done", async () => {
    const calls: number[][] = [];
    const recorder = new AnswerRecorder(async (lines) => {
      calls.push(lines.map((l) => l.index));
    });
    await Promise.all(
      Array.from({ length: 10 }, (_, index) => recorder.record({ index, ok: true, line: "" })),
    );
    expect(calls).toEqual([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]);
  });

  it("splits a large turn into groups of at most 512 lines, every line kept once", async () => {
    const calls: number[][] = [];
    const recorder = new AnswerRecorder(async (lines) => {
      calls.push(lines.map((l) => l.index));
    });
    await Promise.all(
      Array.from({ length: 1_300 }, (_, index) => recorder.record({ index, ok: true, line: "" })),
    );
    expect(calls.map((c) => c.length)).toEqual([512, 512, 276]);
    expect(calls.flat()).toEqual(Array.from({ length: 1_300 }, (_, k) => k));
  });

  it("fails every line of a group whose call failed, and only those", async () => {
    let call = 0;
    const recorder = new AnswerRecorder(async () => {
      if (call++ === 0) throw new Error("redis went away");
    });
    const first = recorder.record({ index: 0, ok: true, line: "" });
    await expect(first).rejects.toThrow("redis went away");
    await expect(recorder.record({ index: 1, ok: true, line: "" })).resolves.toBeUndefined();
  });
});
