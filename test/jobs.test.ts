import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// No worker at first: jobs stay queued, so queue limits, deadlines and cancels are exact.
const MAX_QUEUE = 5;
// Fallbacks and the cache off: here a missing worker must show as a deadline, not an answer.
const repo = tempRepository({
  digits: { max_queue_size: MAX_QUEUE, fallback: { enabled: false }, cache: { enabled: false } },
});
const stack = new Stack({ workers: 0, env: { MODEL_REPOSITORY: repo } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

interface JobView {
  id: string;
  model: string;
  status: string;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  result: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
}

const features = samples.digits.inputs[0] ?? [];
const getJob = async (id: string) =>
  (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as JobView;
const submit = (body: Record<string, unknown>) => stack.post("/v1/jobs", body);
const ids: Record<string, string> = {};
let workerMetricsUrl = "";

describe("async jobs, deadlines and backpressure", () => {
  it("accepts a job with 202, its urls, and reports it queued", async () => {
    const res = await submit({ model: "digits", input: { features }, priority: 7 });
    expect(res.status).toBe(202);
    const body = (await res.json()) as {
      id: string;
      status: string;
      urls: { self: string; events: string };
    };
    expect(body.status).toBe("queued");
    expect(body.urls).toEqual({
      self: `/v1/jobs/${body.id}`,
      events: `/v1/jobs/${body.id}/events`,
    });
    ids.predict = body.id;
    const view = await getJob(body.id);
    expect(view).toMatchObject({
      id: body.id,
      model: "digits",
      status: "queued",
      started_at: null,
      result: null,
      error: null,
    });
  });

  it("a bad predict or v2 input is refused naming what is wrong in it, not with every kind's shape", async () => {
    const refusal = async (input: Record<string, unknown>) => {
      const res = await submit({ model: "digits", input });
      expect(res.status).toBe(400);
      return ((await res.json()) as { error: { message: string } }).error.message;
    };
    expect(await refusal({ features: "abc" })).toMatch(/^input\.features: /);
    const v2 = { name: "input", shape: [1, 64], datatype: "FP32", data: features };
    expect(await refusal({ inputs: [{ ...v2, shape: undefined }] })).toMatch(
      /^input\.inputs\.0\.shape: /,
    );
    expect(await refusal({ inputs: [v2], parameters: { sequence_id: 5 } })).toMatch(/sequence_id/);
    // a body of no kind still lists them
    expect(await refusal({ pixels: [1] })).toMatch(/^input must be /);
    // past what digits could ever need: a 413 before its 300,000 values are walked (4 M of
    // them weigh past any body, refused before they are parsed)
    const huge = await submit({
      model: "digits",
      input: { inputs: [{ ...v2, data: new Array(300_000).fill(0) }] },
    });
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { message: string } }).error.message).toMatch(
      /exceeds 262144 bytes, the most model 'digits' takes/,
    );
  });

  it("a sync request whose deadline passes while queued gets 504", async () => {
    const started = Date.now();
    const res = await stack.post("/v1/models/digits/predict", { features, timeout_ms: 300 });
    expect(res.status).toBe(504);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it("cancels a queued job, which then never runs", async () => {
    const res = await submit({ model: "digits", input: { features } });
    const { id } = (await res.json()) as { id: string };
    ids.cancelled = id;
    const del = await fetch(stack.url(`/v1/jobs/${id}`), { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(((await del.json()) as JobView).status).toBe("cancelled");
  });

  it("takes a v2 body and a deadline that will pass before any worker comes", async () => {
    const v2 = await submit({
      model: "digits",
      version: "1",
      input: {
        id: "v2-job",
        inputs: [
          {
            name: "input",
            shape: [2, 64],
            datatype: "FP32",
            data: samples.digits.inputs.slice(0, 2).flat(),
          },
        ],
      },
    });
    ids.v2 = ((await v2.json()) as { id: string }).id;
    const late = await submit({ model: "digits", input: { features }, timeout_ms: 200 });
    ids.expired = ((await late.json()) as { id: string }).id;
  });

  it("answers 429 with Retry-After once max_queue_size requests wait", async () => {
    // the API takes the expired job out of the queue at its deadline; wait for that rather
    // than for a guessed time (a loaded machine may run the deadline sweep late)
    await waitFor(async () => (await getJob(ids.expired ?? "")).status === "expired", 5_000);
    let status = 0;
    let submitted = 0;
    let retryAfter: string | null = null;
    while (submitted < MAX_QUEUE + 3) {
      await new Promise((r) => setTimeout(r, 150)); // let the sampled queue length catch up
      const res = await submit({ model: "digits", input: { features } });
      status = res.status;
      retryAfter = res.headers.get("retry-after");
      if (status === 429) break;
      submitted++;
    }
    expect(status).toBe(429);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    // digits v2 holds the predict job, the expired sync group and the fillers: the expired
    // job left the queue at its deadline (the API expires it; no worker needs to see it)
    expect(submitted).toBe(MAX_QUEUE - 2);
    const sync = await stack.post("/v1/models/digits/predict", { features });
    expect(sync.status).toBe(429);
    // refused before its body is read: even a body that is not JSON gets the 429, not a 400
    const unread = await fetch(stack.url("/v1/models/digits/predict"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(unread.status).toBe(429);
    expect(Number(unread.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("once a worker comes: jobs succeed, the expired ones are never computed, the cancelled one never runs", async () => {
    const worker = await stack.startWorker();
    workerMetricsUrl = worker.metricsUrl ?? "";
    await waitFor(async () => (await getJob(ids.predict ?? "")).status === "succeeded", 15_000);
    await waitFor(async () => (await getJob(ids.v2 ?? "")).status === "succeeded", 15_000);
    await waitFor(async () => (await getJob(ids.expired ?? "")).status === "expired", 15_000);

    const predict = await getJob(ids.predict ?? "");
    const [reference] = await referenceLogits("digits", "2", [features]);
    expect(predict.result).toMatchObject({
      prediction: argmax(reference ?? []),
      model_version: "2",
      source: "model",
    });
    expect(predict.started_at).toBeGreaterThanOrEqual(predict.created_at);
    expect(predict.finished_at).toBeGreaterThanOrEqual(predict.started_at ?? 0);

    const v2 = await getJob(ids.v2 ?? "");
    expect(v2.result).toMatchObject({ model_name: "digits", model_version: "1", id: "v2-job" });
    expect((v2.result?.outputs as Array<{ shape: number[] }> | undefined)?.[0]?.shape).toEqual([
      2, 10,
    ]);

    const expired = await getJob(ids.expired ?? "");
    expect(expired.error?.code).toBe("DEADLINE_EXCEEDED");
    expect((await getJob(ids.cancelled ?? "")).status).toBe("cancelled");

    const metrics = await (await fetch(workerMetricsUrl)).text();
    // the expired sync row was dropped before compute; the expired job never reached a worker
    expect(metrics).toMatch(
      /ferry_worker_rows_total\{model="digits",version="2",outcome="deadline_exceeded"\} 1/,
    );
    // rows computed on v2: the predict job and the fillers; never the cancelled job
    const ok = /ferry_worker_rows_total\{model="digits",version="2",outcome="ok"\} (\d+)/.exec(
      metrics,
    );
    expect(Number(ok?.[1])).toBe(1 + (MAX_QUEUE - 2));
  });

  it("cancelling a finished job changes nothing", async () => {
    const del = await fetch(stack.url(`/v1/jobs/${ids.predict}`), { method: "DELETE" });
    expect(((await del.json()) as JobView).status).toBe("succeeded");
  });
});
