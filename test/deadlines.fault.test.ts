import { createParser } from "eventsource-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "./helpers/own-redis.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// The API owns every deadline: here nothing serves tiny-lm or mnist, and a Redis of this
// test's own is frozen (SIGSTOP) and killed; the shared Redis is never touched.
const stack = new Stack({ env: { WORKER_MODELS: "digits" } });
let redis: OwnRedis | undefined;
let frozen: Stack;
beforeAll(async () => {
  redis = await ownRedis();
  // the shipped models: digits answers with fallbacks on, which must not cover Redis failures
  frozen = new Stack({ env: { REDIS_URL: redis.url, WORKER_MODELS: "digits" } });
  await Promise.all([stack.start(), frozen.start()]);
});
afterAll(async () => {
  redis?.signal("SIGCONT");
  await Promise.all([stack.stop(), frozen.stop().catch(() => undefined)]);
  await redis?.stop();
});

const timed = async <T>(work: Promise<T>): Promise<[T, number]> => {
  const t = performance.now();
  const value = await work;
  return [value, performance.now() - t];
};

describe("no worker serves the model: the deadline still holds", () => {
  it("a predict waits for a worker, then 504 at its deadline, never a made-up answer", async () => {
    const [res, ms] = await timed(
      stack.post(
        "/v1/models/mnist/predict",
        { features: samples.mnist.inputs[0] },
        { "X-Timeout-Ms": "600" },
      ),
    );
    expect(res.status).toBe(504);
    expect(ms).toBeGreaterThan(550);
    expect(ms).toBeLessThan(1_500);
  });

  it("a completion: 504 at its deadline, streamed or not (no 200 and silence)", async () => {
    for (const stream of [false, true]) {
      const [res, ms] = await timed(
        stack.post("/v1/completions", {
          model: "tiny-lm",
          prompt: "Q: Why?\nA:",
          timeout_ms: 800,
          stream,
        }),
      );
      expect(res.status).toBe(504);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        "deadline_exceeded",
      );
      expect(ms).toBeGreaterThan(750);
      expect(ms).toBeLessThan(2_000);
    }
  });

  it("an async job is expired at its deadline: its poll and its event stream say so, and it never runs", async () => {
    const submitted = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Q: When?\nA:", max_tokens: 4 },
      timeout_ms: 700,
    });
    const { id } = (await submitted.json()) as { id: string };
    const events: string[] = [];
    const [, ms] = await timed(
      (async () => {
        const res = await fetch(stack.url(`/v1/jobs/${id}/events`));
        const parser = createParser({ onEvent: (e) => events.push(`${e.event}:${e.data}`) });
        const reader = res.body?.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const chunk = await reader?.read();
          if (!chunk || chunk.done) break;
          parser.feed(decoder.decode(chunk.value, { stream: true }));
        }
      })(),
    );
    expect(ms).toBeLessThan(2_000);
    expect(events[0]).toMatch(/^status:.*queued/);
    expect(events.at(-2)).toMatch(/^error:.*DEADLINE_EXCEEDED/);
    expect(events.at(-1)).toMatch(/^done:/);
    const poll = async () =>
      (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as {
        status: string;
        error: { code: string } | null;
      };
    expect(await poll()).toMatchObject({ status: "expired", error: { code: "DEADLINE_EXCEEDED" } });
    // a job nobody polls or follows expires all the same, and a worker that starts later
    // never runs either
    const unwatched = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Q: Where?\nA:", max_tokens: 4 },
      timeout_ms: 300,
    });
    const late = ((await unwatched.json()) as { id: string }).id;
    await new Promise((r) => setTimeout(r, 500));
    await stack.startWorker({ WORKER_MODELS: "tiny-lm" });
    await new Promise((r) => setTimeout(r, 500));
    const record = (await (await fetch(stack.url(`/v1/jobs/${late}`))).json()) as {
      status: string;
      started_at: number | null;
    };
    expect(record).toMatchObject({ status: "expired", started_at: null });
    expect(await poll()).toMatchObject({ status: "expired" });
  });
});

describe("a frozen Redis (SIGSTOP): fail fast, keep deadlines, readiness goes red", () => {
  it("predict, /v2/health/ready and /health answer within their budgets, and all recover", async () => {
    const features = samples.digits.inputs[0];
    expect((await frozen.post("/v1/models/digits/predict", { features })).status).toBe(200);
    redis?.signal("SIGSTOP");
    try {
      const [res, ms] = await timed(
        frozen.post(
          "/v1/models/digits/predict",
          { features: samples.digits.inputs[1] },
          { "X-Timeout-Ms": "2000", "Cache-Control": "no-cache" },
        ),
      );
      expect([503, 504]).toContain(res.status);
      expect(ms).toBeLessThan(2_500);
      const [ready, readyMs] = await timed(fetch(frozen.url("/v2/health/ready")));
      expect(ready.status).toBe(503);
      expect(readyMs).toBeLessThan(2_000);
      const [health, healthMs] = await timed(fetch(frozen.url("/health")));
      expect(((await health.json()) as { redis: string }).redis).toBe("down");
      expect(healthMs).toBeLessThan(3_000);
    } finally {
      redis?.signal("SIGCONT");
    }
    await waitFor(async () => (await fetch(frozen.url("/v2/health/ready"))).status === 200, 10_000);
    const after = await frozen.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[2],
    });
    expect(after.status).toBe(200);
  }, 30_000);

  it("Redis gone: 503 at once, even for a model with fallbacks on", async () => {
    await redis?.kill();
    const [res, ms] = await timed(
      frozen.post(
        "/v1/models/digits/predict",
        { features: samples.digits.inputs[3] },
        { "Cache-Control": "no-cache" },
      ),
    );
    expect(res.status).toBe(503);
    expect(ms).toBeLessThan(1_000);
  });
});
