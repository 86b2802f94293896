import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Ferry's own offline batch through a worker's death: a chunk the dead worker held comes back
// to the next one (short locks, so within seconds), is run again, and stores and counts its
// rows once. Every key is answered exactly once, in the items' order.
const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  workerEnv: { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const N = 120_000;
const ndjson = () =>
  Array.from({ length: N }, (_, k) => {
    const base = samples.digits.inputs[k % 64] ?? [];
    const features = base.map((v, i) => (i === k % 64 ? v + (k % 7) : v));
    return `${JSON.stringify({ key: `k${k}`, features })}\n`;
  }).join("");

describe("an offline batch through its worker's death", () => {
  it("the worker SIGKILLed midway: the next finishes it, every key answered once, counts exact", async () => {
    const worker = stack.workers[0];
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: ndjson(),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    await waitFor(async () => (await stack.batchStatus(id)).succeeded > 0, 60_000);
    worker?.child.kill("SIGKILL");
    await worker?.exited;
    const midway = await stack.batchStatus(id);
    expect(midway.succeeded + midway.failed).toBeLessThan(N);
    await stack.startWorker();
    await stack.batchCompleted(id, 120_000);
    expect(await stack.batchStatus(id)).toMatchObject({ total: N, succeeded: N, failed: 0 });

    const lines = (await (await fetch(stack.url(`/v1/batches/${id}/results`))).text())
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { key: string; prediction?: number; error?: object });
    expect(lines).toHaveLength(N);
    // in the items' order, each once
    expect(lines.map((l) => l.key)).toEqual(Array.from({ length: N }, (_, k) => `k${k}`));
    expect(lines.filter((l) => l.error)).toHaveLength(0);
    // a row the dead worker may have held reads as a live predict of it does
    for (const k of [0, 1, N / 2, N - 1]) {
      const features = samples.digits.inputs[k % 64]?.map((v, i) =>
        i === k % 64 ? v + (k % 7) : v,
      );
      const live = (await (await stack.post("/v1/models/digits/predict", { features })).json()) as {
        prediction: number;
      };
      expect(lines[k]?.prediction).toBe(live.prediction);
    }
  }, 240_000);
});
