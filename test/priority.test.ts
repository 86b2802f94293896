import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Batches of one and a single instance: the worker takes two jobs at a time, so the queue
// stays saturated and its order shows.
const repo = tempRepository({
  digits: {
    max_batch_size: 1,
    instance_count: 1,
    dynamic_batching: { preferred_batch_sizes: [], max_queue_delay_ms: 0 },
    fallback: { enabled: false },
    cache: { enabled: false },
  },
});
const stack = new Stack({ workers: 0, env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const features = samples.digits.inputs[0];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("priorities under a saturated queue", () => {
  it("higher-priority jobs and requests wait measurably less", async () => {
    const submit = async (priority: number) => {
      const res = await stack.post("/v1/jobs", { model: "digits", input: { features }, priority });
      return ((await res.json()) as { id: string }).id;
    };
    const low: string[] = [];
    for (let i = 0; i < 60; i++) low.push(await submit(1));
    const high: string[] = [];
    for (let i = 0; i < 10; i++) high.push(await submit(10));
    // sync requests too, by header, queued behind all of that
    const timed = (priority: number) => async () => {
      const t0 = Date.now();
      const res = await stack.post(
        "/v1/models/digits/predict",
        { features },
        { "X-Priority": String(priority) },
      );
      expect(res.status).toBe(200);
      return Date.now() - t0;
    };
    const syncLow = Array.from({ length: 20 }, () => timed(1)());
    const syncHigh = Array.from({ length: 5 }, () => timed(10)());
    await new Promise((r) => setTimeout(r, 200));
    await stack.startWorker();

    const view = async (id: string) =>
      (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as {
        status: string;
        started_at: number;
      };
    await waitFor(
      async () =>
        (await Promise.all([...low, ...high].map(view))).every((j) => j.status === "succeeded"),
      60_000,
    );
    const started = async (ids: string[]) =>
      (await Promise.all(ids.map(view))).map((j) => j.started_at);
    const [lowStarts, highStarts] = await Promise.all([started(low), started(high)]);
    // every high-priority job ran before the low-priority ones still waiting
    expect(Math.max(...highStarts)).toBeLessThanOrEqual(mean(lowStarts));
    const [lowWait, highWait] = [await Promise.all(syncLow), await Promise.all(syncHigh)];
    expect(mean(highWait)).toBeLessThan(mean(lowWait));
  });
});
