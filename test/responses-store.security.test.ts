import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eachKey } from "./helpers/redis-keys.js";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** Keys under the stack's prefix whose content holds `marker` (what bull-board would show). */
async function keysHolding(marker: string): Promise<string[]> {
  const found: string[] = [];
  await eachKey(stack.prefix, "*", async (node, key) => {
    const type = await node.type(key);
    let content = "";
    if (type === "string") content = (await node.get(key)) ?? "";
    if (type === "hash") content = JSON.stringify(await node.hgetall(key));
    if (type === "stream") content = JSON.stringify(await node.xrange(key, "-", "+"));
    if (type === "list") content = JSON.stringify(await node.lrange(key, 0, -1));
    if (content.includes(marker)) found.push(key);
  });
  return found;
}

/** Keys under the stack's prefix whose name holds `id`. */
async function keysNaming(id: string): Promise<string[]> {
  const found: string[] = [];
  await eachKey(stack.prefix, `*${id}*`, async (_node, key) => {
    found.push(key);
  });
  return found;
}

const respond = (marker: string, extra: Record<string, unknown>) =>
  stack.post("/v1/responses", {
    model: "tiny-lm",
    instructions: `Instructions ${marker}`,
    input: `Secret ${marker}`,
    max_output_tokens: 8,
    temperature: 0,
    ...extra,
  });

/** What the jobs routes answer for a response's job: its poll and its events. */
async function jobsRoutes(responseId: string): Promise<number[]> {
  const jobId = responseId.slice("resp_".length);
  const poll = await fetch(stack.url(`/v1/jobs/${jobId}`));
  const events = await fetch(stack.url(`/v1/jobs/${jobId}/events`));
  await Promise.all([poll.body?.cancel(), events.body?.cancel()]);
  return [poll.status, events.status];
}

describe("store: false leaves nothing readable", () => {
  it("a response answered whole: its job is unknown to /v1/jobs and its prompt, conversation and output leave Redis", async () => {
    const marker = `m${Date.now()}a`;
    const res = await respond(marker, { store: false });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string };
    expect(await jobsRoutes(body.id)).toEqual([404, 404]);
    await waitFor(async () => (await keysHolding(marker)).length === 0, 5_000).catch(() => {});
    expect(await keysHolding(marker)).toEqual([]);
  });

  it("a streamed one: the same once its stream has ended", async () => {
    const marker = `m${Date.now()}b`;
    const res = await respond(marker, { store: false, stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    const id = /"id":"(resp_[^"]+)"/.exec(text)?.[1] ?? "";
    expect(id).not.toBe("");
    expect(await jobsRoutes(id)).toEqual([404, 404]);
    await waitFor(async () => (await keysHolding(marker)).length === 0, 5_000).catch(() => {});
    expect(await keysHolding(marker)).toEqual([]);
  });

  it("a streamed one whose deadline passes before its first token: the same", async () => {
    // the model's seats busy with long completions, so that the response waits past its deadline
    const busy = Array.from({ length: 24 }, () =>
      stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Once",
        max_tokens: 240,
        ignore_eos: true,
      }),
    );
    await new Promise((r) => setTimeout(r, 300));
    const marker = `m${Date.now()}d`;
    const res = await respond(marker, { store: false, stream: true, timeout_ms: 50 });
    expect(res.status).toBe(504);
    const job = res.headers.get("x-job-id") ?? "";
    expect(job).not.toBe("");
    await res.text();
    await Promise.all((await Promise.all(busy)).map((r) => r.text()));
    // its job, its log and its index go, as once answered
    await waitFor(async () => (await keysNaming(job)).length === 0, 5_000).catch(() => {});
    expect(await keysNaming(job)).toEqual([]);
    expect(await keysHolding(marker)).toEqual([]);
  });

  it("a stored one stays readable there, as before", async () => {
    const marker = `m${Date.now()}c`;
    const body = (await (await respond(marker, {})).json()) as { id: string };
    expect(await jobsRoutes(body.id)).toEqual([200, 200]);
    expect((await keysHolding(marker)).length).toBeGreaterThan(0);
  });
});
