import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { tempRepository } from "./helpers/model-repo.js";
import { type OwnRedis, ownRedis } from "./helpers/own-redis.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// A Redis of this test's own, with AOF fsynced on every write, that it can SIGKILL and start
// again; the shared Redis is never touched.
let redis: OwnRedis;
const repo = tempRepository({
  digits: { fallback: { enabled: false }, cache: { enabled: false } },
});
let stack: Stack;
beforeAll(async () => {
  redis = await ownRedis();
  stack = new Stack({
    env: {
      REDIS_URL: redis.url,
      MODEL_REPOSITORY: repo,
      WORKER_MODELS: "digits",
    },
    workerEnv: { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" },
  });
  await stack.start();
});
afterAll(async () => {
  await stack.stop().catch(() => undefined);
  await redis?.stop();
});

describe("Redis killed and restarted", () => {
  it("the API answers 503 fast while it is down, and every accepted job completes after", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 150; i++) {
      const res = await stack.post("/v1/jobs", {
        model: "digits",
        input: { features: samples.digits.inputs[i % 64] },
      });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { id: string }).id);
    }
    await redis.kill();

    const t0 = Date.now();
    const down = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[0],
    });
    expect(down.status).toBe(503);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect((await fetch(stack.url("/v2/health/ready"))).status).toBe(503);
    expect(((await (await fetch(stack.url("/health"))).json()) as { redis: string }).redis).toBe(
      "down",
    );

    await redis.start();
    await waitFor(async () => (await fetch(stack.url("/v2/health/ready"))).status === 200, 20_000);
    // ready means ready for the sync path too (its connection reconnects on its own backoff)
    const first = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[0],
    });
    expect(first.status).toBe(200);
    const status = async (id: string) =>
      ((await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as { status: string }).status;
    await waitFor(
      async () => (await Promise.all(ids.map(status))).every((s) => s === "succeeded"),
      60_000,
    );
    const after = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[0],
    });
    expect(after.status).toBe(200);
  }, 120_000);

  it("a worker told to stop while Redis is down exits once its drain times out (it waited for good)", async () => {
    const worker = await stack.startWorker({ DRAIN_TIMEOUT_MS: "1500" });
    await redis.kill();
    try {
      worker.child.kill("SIGTERM");
      const code = await Promise.race([
        worker.exited,
        new Promise((resolve) => setTimeout(() => resolve("still draining"), 15_000)),
      ]);
      expect(code).toBe(1);
      expect(worker.output.join("")).toMatch(/drain timed out/);
    } finally {
      if (!exited(worker.child)) worker.child.kill("SIGKILL");
      await redis.start();
    }
  }, 60_000);
});
