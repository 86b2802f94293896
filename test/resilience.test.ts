import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { tempRepository } from "./helpers/model-repo.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// A long queue delay keeps rows inside the worker's batcher for a while, so a kill lands
// mid-batch with jobs active and locked; short locks let another worker take them soon after.
const repo = tempRepository({
  mnist: {
    dynamic_batching: { preferred_batch_sizes: [], max_queue_delay_ms: 150 },
    max_batch_size: 64,
    fallback: { enabled: false },
    cache: { enabled: false },
  },
});
// Shedding by expected wait has tests of its own: here the service rate the API measures
// while a worker is dead would refuse a burst, and every request must be answered.
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, QUEUE_WAIT_BUDGET_MS: "600000" },
  workerEnv: { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const rows = samples.mnist.inputs;

async function predictAll(n: number, timeoutMs = 30_000) {
  return Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const res = await stack.post("/v1/models/mnist/predict", {
        features: rows[k % rows.length],
        timeout_ms: timeoutMs,
      });
      return {
        k,
        status: res.status,
        body: (await res.json()) as { prediction?: number },
        at: Date.now(),
      };
    }),
  );
}

describe("no accepted request is lost", () => {
  it("a worker SIGKILLed mid-batch: its jobs go to the restarted worker and every request completes", async () => {
    const reference = (await referenceLogits("mnist", "1", rows)).map(argmax);
    const inFlight = predictAll(120);
    // wait until the worker holds active jobs, then kill it without a chance to clean up
    await new Promise((r) => setTimeout(r, 100));
    const victim = stack.workers[0];
    victim?.child.kill("SIGKILL");
    await victim?.exited;
    const killedAt = Date.now();
    await stack.startWorker();
    const answers = await inFlight;
    // the kill really caught work in progress: some answers only came from the new worker
    expect(answers.filter((a) => a.at > killedAt).length).toBeGreaterThan(0);
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body.prediction).toBe(reference[a.k % rows.length]);
    }
  });

  it("a worker SIGTERMed under load drains: running jobs finish, queued ones wait for the next worker", async () => {
    const inFlight = predictAll(120);
    await new Promise((r) => setTimeout(r, 100));
    const draining = stack.workers.at(-1);
    draining?.child.kill("SIGTERM");
    const code = await Promise.race([
      draining?.exited,
      new Promise((r) => setTimeout(() => r("hung"), 20_000)),
    ]);
    if (code !== 0) console.log(draining?.output.join(""));
    expect(code).toBe(0);
    await stack.startWorker();
    const answers = await inFlight;
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
  });

  it("an API SIGTERMed with requests open answers them all before it exits", async () => {
    // stop the worker so requests sit open in the API, then drain the API and bring a worker back
    const worker = stack.workers.at(-1);
    worker?.child.kill("SIGTERM");
    await worker?.exited;
    const inFlight = predictAll(20);
    await new Promise((r) => setTimeout(r, 300));
    stack.api.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 300));
    expect(exited(stack.api.child)).toBe(false); // still draining: it waits for its open requests
    stack.launchWorker();
    const answers = await inFlight;
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(await stack.api.exited).toBe(0);
  });
});
