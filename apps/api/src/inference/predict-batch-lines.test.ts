import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import type { CallOptions } from "../http/call.js";
import type { InferenceService } from "./inference-service.js";
import type { PackedPredictions, PackedRun } from "./packed-predictions.js";
import { predictBatchLines } from "./predict-batch-lines.js";

/** A packed run that answers each body after `delayMs`, recording every run it is asked for. */
function fakePacked(delayMs: number) {
  const runs: Array<{ model: string; rows: number; timeoutMs: number | undefined }> = [];
  const run: Pick<PackedRun, "run" | "close"> = {
    async run(model, bodies, opts) {
      runs.push({ model, rows: bodies.length, timeoutMs: opts.timeoutMs });
      await new Promise((r) => setTimeout(r, delayMs));
      return bodies.map((b) => ({ prediction: b.features[0] }) as never);
    },
    close: async () => {},
  };
  const packed = { open: () => run } as unknown as PackedPredictions;
  // the repository knows digits and mnist
  const inference = {
    resolveClassifier: (model: string) => {
      if (model !== "digits" && model !== "mnist")
        throw new FerryError("NOT_FOUND", `Model '${model}' not found`);
      return {};
    },
  } as unknown as InferenceService;
  return { runs, kind: predictBatchLines(inference, packed) };
}

const opts: CallOptions = {
  requestId: "req_1",
  tenant: { id: "t", admin: false },
  timeoutMs: 3_600_000,
};
const line = (model: string, k: number, timeout_ms?: number) => ({
  url: `/v1/models/${model}/predict`,
  body: { features: [k], ...(timeout_ms === undefined ? {} : { timeout_ms }) },
});

describe("predict lines of an OpenAI batch", () => {
  it("a chunk's lines of distinct timeout_ms run as one job per model, under the longest", async () => {
    const { runs, kind } = fakePacked(0);
    const lines = Array.from({ length: 500 }, (_, k) =>
      line(k % 2 ? "mnist" : "digits", k, 600_000 + k),
    );
    const outcomes = await kind.openMany?.("t").run(lines, opts, new AbortController().signal);
    expect(runs.map((r) => [r.model, r.rows, r.timeoutMs]).sort()).toEqual([
      ["digits", 250, 600_498],
      ["mnist", 250, 600_499],
    ]);
    expect(outcomes?.every((o) => "value" in o)).toBe(true);
  });

  it("a line whose own timeout_ms passed before its answer is that deadline's error; a line without one runs under the window", async () => {
    const { runs, kind } = fakePacked(30);
    const lines = [line("digits", 0, 5), line("digits", 1), line("digits", 2, 60_000)];
    const outcomes = await kind.openMany?.("t").run(lines, opts, new AbortController().signal);
    expect(runs).toEqual([{ model: "digits", rows: 3, timeoutMs: 3_600_000 }]);
    const [late, open, roomy] = outcomes ?? [];
    expect(late && "error" in late && late.error).toBeInstanceOf(FerryError);
    expect((late as { error: FerryError }).error.code).toBe("DEADLINE_EXCEEDED");
    expect(open).toEqual({ value: { prediction: 1 } });
    expect(roomy).toEqual({ value: { prediction: 2 } });
  });

  it("an unknown model is the route's 404 whatever the body, as a line sent alone", async () => {
    const { runs, kind } = fakePacked(0);
    const lines = [
      { url: "/v1/models/nope/predict", body: { features: "not numbers" } },
      { url: "/v1/models/digits/predict", body: { features: "not numbers" } },
      line("digits", 7),
    ];
    const outcomes = await kind.openMany?.("t").run(lines, opts, new AbortController().signal);
    const codes = outcomes?.map((o) => ("error" in o ? (o.error as FerryError).code : "ok"));
    expect(codes).toEqual(["NOT_FOUND", "INVALID_INPUT", "ok"]);
    expect(runs).toHaveLength(1);
  });
});
