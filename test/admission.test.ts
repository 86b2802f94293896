import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// A small queue with the prediction cache on: a full queue refuses new work, not answers
// the cache already holds (Triton also looks its response cache up before the queue).
const MAX_QUEUE = 3;
const repo = tempRepository({
  digits: {
    max_queue_size: MAX_QUEUE,
    cache: { enabled: true, ttl_s: 3600, max_entries: 1000 },
    fallback: { enabled: false },
  },
});
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" } });
// the same model on a stack of its own: its cache will have missed every lookup
const missing = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" } });
// the shipped model.json (max_queue_size 2000) and queue-wait budget (5 s)
const shipped = new Stack({ env: { WORKER_MODELS: "digits" } });
beforeAll(() => Promise.all([stack.start(), missing.start(), shipped.start()]));
afterAll(() => Promise.all([stack.stop(), missing.stop(), shipped.stop()]));

/** Kills every worker of `s`, then queues jobs until its queue is full. */
async function fillQueue(s: Stack): Promise<void> {
  for (const w of s.workers) w.child.kill("SIGKILL");
  await Promise.all(s.workers.splice(0).map((w) => w.exited));
  for (let i = 0; i < MAX_QUEUE; i++) {
    const res = await s.post("/v1/jobs", { model: "digits", input: { features: fresh } });
    expect(res.status).toBe(202);
  }
}

const [cached = [], fresh = []] = samples.digits.inputs;
const predict = (features: number[]) => stack.post("/v1/models/digits/predict", { features });

describe("admission with the prediction cache on", () => {
  it("a full queue refuses a new input with 429 and still answers a cached one", async () => {
    const first = await predict(cached);
    expect(((await first.json()) as { source: string }).source).toBe("model");
    // no worker from here on: jobs stay queued until the queue is full
    await fillQueue(stack);
    const refused = await predict(fresh);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    const hit = await predict(cached);
    expect(hit.status).toBe(200);
    expect(((await hit.json()) as { source: string }).source).toBe("cache");
  });

  it("a model whose cache has missed every lookup lately refuses at the gate: no body is parsed", async () => {
    // sixty inputs nobody sent before: sixty misses
    for (let k = 0; k < 60; k++) {
      const features = cached.map((v, i) => (i === k % 64 ? (v + 1 + Math.floor(k / 64)) % 17 : v));
      const res = await missing.post("/v1/models/digits/predict", { features });
      expect(((await res.json()) as { source: string }).source).toBe("model");
    }
    await fillQueue(missing);
    // refused before its body is read: a body that is not JSON gets the 429, not a 400
    const refused = await fetch(missing.url("/v1/models/digits/predict"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "not json",
    });
    expect(refused.status).toBe(429);
  });
});

describe("admission by expected wait", () => {
  it("light traffic, then a burst on idle workers: admitted, not refused at the callers' pace", async () => {
    const send = (k: number) =>
      shipped.post("/v1/models/digits/predict", {
        features: fresh.map((v, i) => (i === k % 64 ? v + 1 + Math.floor(k / 64) : v)),
      });
    // a request every 600 ms: rows answered at ~2 a second, each before the next is sent
    for (let k = 0; k < 3; k++) {
      expect((await send(k)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 600));
    }
    // 300 at once: at "2 rows/s" that would be minutes of wait; the workers take a fraction
    // of a second
    const statuses = await Promise.all(
      Array.from({ length: 300 }, (_, k) => send(3 + k).then((res) => res.status)),
    );
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
