import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scrapeMetric } from "./helpers/metrics.js";
import { countKeys } from "./helpers/redis-keys.js";
import { readCompletion, readSse } from "./helpers/sse.js";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm,digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const completion = (prompt: string, maxTokens: number, stream: boolean, signal?: AbortSignal) =>
  fetch(stack.url("/v1/completions"), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "tiny-lm",
      prompt,
      max_tokens: maxTokens,
      ignore_eos: true,
      temperature: 0.8,
      seed: 3,
      stream,
    }),
    ...(signal ? { signal } : {}),
  });

/** A completion job's text, read from its event log once it has its result. */
async function jobResult(jobId: string): Promise<string> {
  let result = "";
  await readSse(await fetch(stack.url(`/v1/jobs/${jobId}/events`)), (e) => {
    if (e.event === "result")
      result = (JSON.parse(e.data) as { result: { text: string } }).result.text;
    return undefined;
  });
  return result;
}

describe("Ctrl-C (SIGINT) drains the API", () => {
  it("every open completion stream runs to [DONE] before the API exits", async () => {
    let started = 0;
    let allStarted: () => void = () => {};
    const ready = new Promise<void>((r) => {
      allStarted = r;
    });
    const streams = Array.from({ length: 12 }, async (_, k) => {
      const res = await completion(`Q: ${k}?\nA:`, 120, true);
      expect(res.status).toBe(200);
      let first = true;
      return readCompletion(res, () => {
        if (first && ++started === 12) allStarted();
        first = false;
      });
    });
    await ready;
    stack.api.child.kill("SIGINT");
    const results = await Promise.all(streams);
    for (const r of results) {
      expect(r.done).toBe(true);
      expect(r.error).toBeUndefined();
      expect(r.text.length).toBeGreaterThan(100);
    }
    expect(await stack.api.exited).toBe(0);
    await stack.startApi();
  });

  it("an API that stops leaves nothing of its own in the temp directory (one board template a start had piled up)", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "ferry-tmp-"));
    try {
      await stack.startApi({ TMPDIR: tmp });
      // the board's template, which it renders on every page, is there while it runs
      expect(readdirSync(tmp).filter((f) => f.startsWith("ferry-board-"))).toHaveLength(1);
      stack.api.child.kill("SIGTERM");
      expect(await stack.api.exited).toBe(0);
      // (tsx keeps its compile cache there too: not the API's)
      expect(readdirSync(tmp).filter((f) => f.startsWith("ferry-"))).toEqual([]);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      await stack.startApi();
    }
  });

  it("streams still open when the drain runs out of time end with where to resume, and lose nothing", async () => {
    await stack.api.child.kill("SIGKILL");
    await stack.api.exited;
    await stack.startApi({ DRAIN_TIMEOUT_MS: "1" });
    const res = await completion("It was a dark and stormy night", 200, true);
    const jobId = res.headers.get("x-job-id") ?? "";
    let chunks = 0;
    const read = readCompletion(res, () => {
      if (++chunks === 5) stack.api.child.kill("SIGTERM");
    });
    const cut = await read;
    expect(cut.done).toBe(false);
    expect(cut.error?.job).toBe(jobId);
    expect(cut.error?.message).toMatch(/resume at \/v1\/jobs\/.*\/events with Last-Event-ID/);
    expect(await stack.api.exited).toBe(0);

    await stack.startApi();
    const rest = await fetch(stack.url(`/v1/jobs/${jobId}/events`), {
      headers: { "Last-Event-ID": cut.lastId ?? "" },
    });
    let text = cut.text;
    let result = "";
    await readSse(rest, (e) => {
      const body = JSON.parse(e.data) as { text?: string; result?: { text: string } };
      if (e.event === "token") text += body.text ?? "";
      if (e.event === "result") result = body.result?.text ?? "";
      return undefined;
    });
    expect(result.length).toBeGreaterThan(0);
    expect(text).toBe(result);
  });

  it("a stream of several prompts cut by the drain names every job, and every job goes on", async () => {
    await stack.api.child.kill("SIGKILL");
    await stack.api.exited;
    await stack.startApi({ DRAIN_TIMEOUT_MS: "1" });
    const res = await fetch(stack.url("/v1/completions"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "tiny-lm",
        prompt: ["It was a dark", "and stormy night"],
        max_tokens: 200,
        ignore_eos: true,
        stream: true,
      }),
    });
    const jobs = (res.headers.get("x-job-id") ?? "").split(", ");
    expect(jobs).toHaveLength(2);
    let chunks = 0;
    let error: { jobs?: string[]; message: string } | undefined;
    let done = false;
    await readSse(res, (e) => {
      if (e.data === "[DONE]") done = true;
      else error = (JSON.parse(e.data) as { error?: typeof error }).error ?? error;
      if (++chunks === 5) stack.api.child.kill("SIGTERM");
      return undefined;
    });
    expect(done).toBe(false);
    expect(error?.jobs).toEqual(jobs);
    for (const job of jobs) expect(error?.message).toContain(`/v1/jobs/${job}/events`);
    expect(await stack.api.exited).toBe(0);

    await stack.startApi();
    for (const job of jobs) expect((await jobResult(job)).length).toBeGreaterThan(0);
  });

  it("a stream still waiting for its first token when the drain runs out answers 503 with its job, which goes on", async () => {
    // no worker: the completion waits in its queue, and its stream for a first token
    for (const w of stack.workers) w.child.kill("SIGKILL");
    await Promise.all(stack.workers.splice(0).map((w) => w.exited));
    await stack.api.child.kill("SIGKILL");
    await stack.api.exited;
    await stack.startApi({ DRAIN_TIMEOUT_MS: "300" });
    const before = await countKeys(stack.prefix, "job-queue:*");
    const pending = completion("Q: Who waits?\nA:", 20, true);
    // queued (its index stored), its stream waiting for a first token
    await waitFor(async () => (await countKeys(stack.prefix, "job-queue:*")) > before, 10_000);
    stack.api.child.kill("SIGTERM");
    const res = await pending;
    expect(res.status).toBe(503);
    const jobId = res.headers.get("x-job-id") ?? "";
    expect(jobId).not.toBe("");
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
      `/v1/jobs/${jobId}/events`,
    );
    expect(await stack.api.exited).toBe(0);

    await stack.startApi();
    await stack.startWorker();
    expect((await jobResult(jobId)).length).toBeGreaterThan(0);
  });
});

describe("a client that goes away frees its seat", () => {
  it("non-streamed completions whose clients disconnect are cancelled at the next step", async () => {
    const metrics = stack.workers[0]?.metricsUrl ?? "";
    const cancelledBefore = await scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total");
    const tokensBefore = await scrapeMetric(metrics, "ferry_worker_generated_tokens_total");
    const aborts = Array.from({ length: 8 }, () => new AbortController());
    const calls = aborts.map((a, k) =>
      completion(`Q: ${k}!\nA:`, 220, false, a.signal).catch(() => undefined),
    );
    await waitFor(
      async () => (await scrapeMetric(metrics, "ferry_worker_running_sequences")) >= 1,
      10_000,
    );
    await new Promise((r) => setTimeout(r, 100));
    for (const a of aborts) a.abort();
    await Promise.all(calls);
    const t = Date.now();
    await waitFor(
      async () => (await scrapeMetric(metrics, "ferry_worker_running_sequences")) === 0,
      3_000,
    );
    expect(Date.now() - t).toBeLessThan(3_000);
    expect(await scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total")).toBe(
      cancelledBefore + 8,
    );
    // far fewer tokens than the 8 x 220 that running them to the end would have made
    const tokens =
      (await scrapeMetric(metrics, "ferry_worker_generated_tokens_total")) - tokensBefore;
    expect(tokens).toBeLessThan(0.6 * 8 * 220);
  });
});
