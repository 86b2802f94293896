import { FerryError } from "@ferry/protocol";
import type { InferenceClient, OpenAiBatchState } from "@ferry/transport";
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { ManyLines } from "../http/batch-line.js";
import type { AnswerRecorder } from "./answer-recorder.js";
import { LineAnswerer } from "./line-answerer.js";

const CAP_MS = 40;
const now = Math.floor(Date.now() / 1000);
const batch = {
  id: "batch_cap",
  owner: "t",
  expires_at: now + 86_400,
} as OpenAiBatchState;

/** Lines that wait past one call's cap the first time they run, and are answered the next. */
function backlogged() {
  const calls: string[][] = [];
  const many: ManyLines = {
    run: async (lines, opts) => {
      calls.push(lines.map((l) => String((l.body as { features: number[] }).features[0])));
      if (calls.length > 1) return lines.map(() => ({ value: { ok: true } }));
      await new Promise((r) => setTimeout(r, (opts.timeoutMs ?? 0) + 5));
      return lines.map(() => ({ error: new FerryError("DEADLINE_EXCEEDED", "deadline passed") }));
    },
    close: async () => {},
  };
  return { many, calls };
}

describe("an OpenAI batch's lines past one call's cap", () => {
  it("run again while the window is open; a line whose own timeout_ms passed keeps its 504", async () => {
    const answerer = new LineAnswerer(
      {} as InferenceClient,
      new Map(),
      pino({ level: "silent" }),
      CAP_MS,
    );
    const { many, calls } = backlogged();
    const kept: Array<{ index: number; ok: boolean; line: string }> = [];
    const recorder = { record: async (line: (typeof kept)[number]) => void kept.push(line) };
    const url = "/v1/models/m/predict";
    const group = [
      { index: 0, line: { custom_id: "a", url, body: { features: [1] } } },
      { index: 1, line: { custom_id: "own", url, body: { features: [2], timeout_ms: 30 } } },
      { index: 2, line: { custom_id: "b", url, body: { features: [3] } } },
    ];
    await answerer.group(
      batch,
      many,
      group,
      new AbortController().signal,
      recorder as unknown as AnswerRecorder,
    );
    expect(calls).toEqual([
      ["1", "2", "3"],
      ["1", "3"],
    ]);
    const byId = Object.fromEntries(
      kept.map((k) => [JSON.parse(k.line.slice(1)).custom_id, JSON.parse(k.line.slice(1))]),
    );
    expect(byId.a.response.status_code).toBe(200);
    expect(byId.b.response.status_code).toBe(200);
    expect(byId.own.response.status_code).toBe(504);
  });
});
