import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eachKey } from "./helpers/redis-keys.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

const JOB_TTL_S = 120;
const SYNC_JOB_TTL_S = 60;
const stack = new Stack({
  env: {
    WORKER_MODELS: "digits,tiny-lm",
    JOB_TTL_S: String(JOB_TTL_S),
    SYNC_JOB_TTL_S: String(SYNC_JOB_TTL_S),
  },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/**
 * Keys that stand for the deployment, not for one request: one per queue (BullMQ's meta, id
 * counter, event stream, finished sets trimmed by age as jobs finish) or per model (traffic,
 * statistics, reload generation), the sync lanes' streams (an entry is deleted once answered)
 * and the live worker list. Their number does not grow with the traffic.
 */
const STANDING =
  /:(meta|id|events|completed|failed|stalled-check|marker|workers|stats:.*|traffic:.*|generation:.*|deadlines|removing|sync:\{[^}]+\}:\d+)$/;

/** Every key under the stack's prefix that has no TTL, standing keys left out. */
async function keysWithoutTtl(): Promise<string[]> {
  const found: string[] = [];
  await eachKey(stack.prefix, "*", async (node, key) => {
    if ((await node.ttl(key)) === -1 && !STANDING.test(key)) found.push(key);
  });
  return found.sort();
}

const features = samples.digits.inputs[0] ?? [];

describe("every key a request leaves has a TTL or is removed", () => {
  it("after a batch, async predicts and an async completion finish on queues that then go idle", async () => {
    const items = Array.from({ length: 20 }, (_, k) => ({ key: `k${k}`, features }));
    const batch = (await (await stack.post("/v1/batches", { model: "digits", items })).json()) as {
      id: string;
    };
    await stack.batchCompleted(batch.id, 30_000);
    const jobs: string[] = [];
    for (const input of [{ features }, { features }]) {
      const res = await stack.post("/v1/jobs", { model: "digits", input });
      jobs.push(((await res.json()) as { id: string }).id);
    }
    const completion = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Once", max_tokens: 4 },
    });
    jobs.push(((await completion.json()) as { id: string }).id);
    for (const id of jobs)
      await waitFor(async () => {
        const job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as {
          status: string;
        };
        return job.status === "succeeded";
      }, 30_000);
    // the worker's expiry follows BullMQ's own completion by a round trip
    await waitFor(async () => (await keysWithoutTtl()).length === 0, 3_000).catch(() => {});
    expect(await keysWithoutTtl()).toEqual([]);
  });

  it("a sync completion's job is kept SYNC_JOB_TTL_S, not JOB_TTL_S", async () => {
    // streamed: its job is named in X-Job-Id
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Once",
      max_tokens: 2,
      stream: true,
    });
    expect(res.status).toBe(200);
    await res.text();
    const id = res.headers.get("x-job-id") ?? "";
    expect(id).not.toBe("");
    const ttls: number[] = [];
    await waitFor(async () => {
      ttls.length = 0;
      await eachKey(stack.prefix, `*:${id}*`, async (node, key) => {
        ttls.push(await node.ttl(key));
      });
      return ttls.length >= 2 && ttls.every((t) => t > 0 && t <= SYNC_JOB_TTL_S);
    }, 3_000).catch(() => {});
    // its BullMQ hash and its event log
    expect(ttls.length).toBeGreaterThanOrEqual(2);
    for (const ttl of ttls) expect(ttl).toBeLessThanOrEqual(SYNC_JOB_TTL_S);
  });

  it("after an OpenAI batch ran from an uploaded file, and another was cancelled", async () => {
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const line = (k: number) =>
      JSON.stringify({
        custom_id: `r${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features },
      });
    const jsonl = `${Array.from({ length: 5 }, (_, k) => line(k)).join("\n")}\n`;
    const file = await openai.files.create({
      file: await toFile(Buffer.from(jsonl), "rows.jsonl"),
      purpose: "batch",
    });
    const create = () =>
      openai.batches.create({
        input_file_id: file.id,
        endpoint: "/v1/models/digits/predict" as "/v1/chat/completions",
        completion_window: "24h",
      });
    const ran = await create();
    const other = await create();
    // (one that finished first stays completed)
    await openai.batches.cancel(other.id).catch(() => undefined);
    for (const id of [ran.id, other.id])
      await waitFor(async () => {
        const batch = await openai.batches.retrieve(id);
        return ["completed", "cancelled"].includes(batch.status);
      }, 30_000);
    await waitFor(async () => (await keysWithoutTtl()).length === 0, 3_000).catch(() => {});
    expect(await keysWithoutTtl()).toEqual([]);
  });
});
