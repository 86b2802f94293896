import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scrapeMetric } from "./helpers/metrics.js";
import { brokenRepository, tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// mnist: fallbacks on but no default answer, so that the last resort (503) shows.
const repo = tempRepository({
  digits: { cache: { enabled: true, ttl_s: 3600, max_entries: 1000 } },
  mnist: { fallback: { enabled: true } },
});
const ADMIN = { Authorization: "Bearer test-admin" };
const stack = new Stack({ env: { MODEL_REPOSITORY: repo }, apiEnv: { ADMIN_TOKEN: "test-admin" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

type Answer = { prediction: number; model_version: string; source: string };
const predict = async (
  features: number[] | undefined,
  headers: Record<string, string> = {},
  extra = {},
) => {
  const res = await stack.post("/v1/models/digits/predict", { features, ...extra }, headers);
  return { status: res.status, body: (await res.json()) as Answer };
};
const admin = (path: string, method: string, body?: unknown) =>
  fetch(stack.url(path), {
    method,
    headers: { ...ADMIN, "content-type": "application/json" },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
/** An input no other test sent: a sample with one pixel changed. */
const fresh = (k: number, pixel: number) =>
  (samples.digits.inputs[k] ?? []).map((v, i) => (i === pixel ? (v + 7) % 17 : v));
const workerRows = () =>
  scrapeMetric(stack.workers.at(-1)?.metricsUrl ?? "", "ferry_worker_rows_total", 'model="digits"');

async function many(
  n: number,
  concurrency: number,
  headers: Record<string, string>,
): Promise<Answer[]> {
  const out: Answer[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const k = next++;
        const { status, body } = await predict(
          samples.digits.inputs[k % samples.digits.inputs.length],
          headers,
        );
        expect(status).toBe(200);
        out.push(body);
      }
    }),
  );
  return out;
}

describe("canary traffic and rollback", () => {
  it("refuses invalid splits", async () => {
    expect((await admin("/admin/models/digits/traffic", "PUT", { "1": 90, "2": 20 })).status).toBe(
      400,
    );
    expect((await admin("/admin/models/digits/traffic", "PUT", { "7": 100 })).status).toBe(400);
  });

  it("a 90/10 split over 2,000 requests lands within 87-93% / 7-13%, each answer naming its version", async () => {
    const res = await admin("/admin/models/digits/traffic", "PUT", { "1": 90, "2": 10 });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { traffic: unknown }).traffic).toEqual({ "1": 90, "2": 10 });
    const answers = await many(2000, 32, { "Cache-Control": "no-cache" });
    const v1 = answers.filter((a) => a.model_version === "1").length / answers.length;
    const v2 = answers.filter((a) => a.model_version === "2").length / answers.length;
    expect(v1).toBeGreaterThanOrEqual(0.87);
    expect(v1).toBeLessThanOrEqual(0.93);
    expect(v2).toBeGreaterThanOrEqual(0.07);
    expect(v2).toBeLessThanOrEqual(0.13);
  });

  it("/admin/models shows per-version requests, errors and latency", async () => {
    const body = (await (await admin("/admin/models", "GET")).json()) as {
      models: Array<{
        name: string;
        stats: Record<string, { requests: number; errors: number; p95_ms: number | null }>;
      }>;
    };
    const digits = body.models.find((m) => m.name === "digits");
    expect(digits?.stats["1"]?.requests).toBeGreaterThan(1700);
    expect(digits?.stats["2"]?.requests).toBeGreaterThan(100);
    expect(digits?.stats["1"]?.errors).toBe(0);
    expect(digits?.stats["1"]?.p95_ms).toBeGreaterThan(0);
  });

  it("rollback sends every request to the stable version at once", async () => {
    const res = await admin("/admin/models/digits/rollback", "POST");
    expect(((await res.json()) as { traffic: unknown }).traffic).toEqual({ "2": 100 });
    const answers = await many(200, 16, { "Cache-Control": "no-cache" });
    expect(answers.every((a) => a.model_version === "2")).toBe(true);
  });
});

describe("prediction cache", () => {
  it("a repeated input is answered from the cache without reaching a worker", async () => {
    const features = fresh(40, 20);
    const first = await predict(features);
    expect(first.body.source).toBe("model");
    await new Promise((r) => setTimeout(r, 50)); // the store is written after the answer
    const rowsBefore = await workerRows();
    const second = await predict(features);
    expect(second.body).toMatchObject({
      source: "cache",
      prediction: first.body.prediction,
      model_version: "2",
    });
    expect(await workerRows()).toBe(rowsBefore);
    const skipped = await predict(features, { "Cache-Control": "no-cache" });
    expect(skipped.body.source).toBe("model");
    const metrics = await (await fetch(stack.url("/metrics"))).text();
    expect(metrics).toMatch(/ferry_cache_requests_total\{model="digits",result="hit"\} [1-9]/);
  });

  it("another API replica answers it from the shared cache (looked up in the enqueue's script)", async () => {
    const features = fresh(43, 23);
    expect((await predict(features)).body.source).toBe("model");
    await new Promise((r) => setTimeout(r, 50)); // the store is written after the answer
    // a new API process: nothing in its own memory, only what Redis holds
    stack.api.child.kill("SIGTERM");
    await stack.api.exited;
    await stack.startApi();
    const rowsBefore = await workerRows();
    const [again, other] = await Promise.all([predict(features), predict(fresh(44, 24))]);
    expect(again.body.source).toBe("cache");
    // a new input beside it missed and was computed
    expect(other.body.source).toBe("model");
    expect(await workerRows()).toBe(rowsBefore + 1);
  });
});

describe("fallbacks: only for a model that fails, never for one that is starting", () => {
  it("a deadline that passes is a 504, not a fallback answer", async () => {
    const features = fresh(41, 21);
    await predict(features); // stores the answer a fallback could have used
    for (const w of stack.workers) w.child.kill("SIGTERM");
    await Promise.all(stack.workers.map((w) => w.exited));
    const late = await predict(features, { "Cache-Control": "no-cache", "X-Timeout-Ms": "300" });
    expect(late.status).toBe(504);
  });

  it("with no live worker a request waits in the queue and is answered by the model once one starts", async () => {
    const waiting = predict(fresh(43, 23), {
      "Cache-Control": "no-cache",
      "X-Timeout-Ms": "20000",
    });
    await new Promise((r) => setTimeout(r, 300));
    await stack.startWorker();
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.body.source).toBe("model");
  });

  it("a model that fails on its worker: the last answer for that input, else the default, else a clear 503", async () => {
    const seenBefore = fresh(40, 20);
    expect((await predict(seenBefore)).body.source).toMatch(/model|cache/);
    // the same models, versions and generation, but every run now fails on the worker
    for (const w of stack.workers) w.child.kill("SIGTERM");
    await Promise.all(stack.workers.map((w) => w.exited));
    const broken = brokenRepository(brokenRepository(repo, "digits"), "mnist");
    await stack.startWorker({ MODEL_REPOSITORY: broken });
    const seen = await predict(seenBefore, { "Cache-Control": "no-cache" });
    expect(seen.body.source).toBe("fallback_cache");
    const unseen = await predict(fresh(42, 22), { "Cache-Control": "no-cache" });
    expect(unseen.body).toMatchObject({ source: "fallback_default", prediction: 3 });
    const res = await stack.post("/v1/models/mnist/predict", { features: samples.mnist.inputs[0] });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /no fallback answer for this input/,
    );
    const fallbacks = await (await fetch(stack.url("/metrics"))).text();
    expect(fallbacks).toMatch(
      /ferry_fallbacks_total\{model="digits",source="fallback_default"\} [1-9]/,
    );
  });
});
