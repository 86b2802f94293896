import { readFileSync } from "node:fs";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { eachKey } from "./helpers/redis-keys.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// The API runs with a 64 MB heap cap: a batch held whole in memory (~20 MB of NDJSON, ~70 MB
// once parsed) would crash it, so the 100k-item test proves streaming, not just a low reading.
const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiNodeArgs: ["--max-old-space-size=64"],
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

describe("offline batch prediction", () => {
  it("predicts a JSON batch, stores every answer by key and serves it without inference", async () => {
    const items = samples.digits.inputs.map((features, k) => ({ key: `user-${k}`, features }));
    const res = await stack.post("/v1/batches", { model: "digits", items });
    expect(res.status).toBe(202);
    const { id, total } = (await res.json()) as { id: string; total: number };
    expect(total).toBe(items.length);
    await stack.batchCompleted(id, 30_000);
    expect(await stack.batchStatus(id)).toMatchObject({ total: 64, succeeded: 64, failed: 0 });

    const reference = (await referenceLogits("digits", "2", samples.digits.inputs)).map(argmax);
    const lines = (await (await fetch(stack.url(`/v1/batches/${id}/results`))).text())
      .trim()
      .split("\n");
    expect(lines).toHaveLength(64);
    for (const line of lines) {
      const r = JSON.parse(line) as { key: string; prediction: number; scores: number[] };
      expect(r.prediction).toBe(reference[Number(r.key.slice(5))]);
      expect(r.scores).toHaveLength(10);
    }
    const stored = await (await fetch(stack.url("/v1/predictions/digits/user-7"))).json();
    expect(stored).toMatchObject({
      key: "user-7",
      prediction: reference[7],
      model_version: "2",
      batch: id,
    });
    expect((await fetch(stack.url("/v1/predictions/digits/nobody"))).status).toBe(404);

    // answers by key are kept in a hash per span of JOB_TTL_S, which a later batch does not
    // keep alive: it expires two spans after it opened, every key in it with it
    const expiries = async () => {
      const at: number[] = [];
      await eachKey(stack.prefix, "predictions:digits*", async (node, key) => {
        at.push(await node.pexpiretime(key));
      });
      return at;
    };
    // (this stack's JOB_TTL_S is the default, a day; a run across midnight UTC proves nothing)
    const dayMs = 86_400_000;
    const span = Math.floor(Date.now() / dayMs);
    const before = await expiries();
    expect(before).toHaveLength(1);
    expect(before[0]).toBe((span + 2) * dayMs);
    await new Promise((r) => setTimeout(r, 1_100));
    const again = await stack.post("/v1/batches", { model: "digits", items: items.slice(0, 2) });
    await stack.batchCompleted(((await again.json()) as { id: string }).id, 30_000);
    if (Math.floor(Date.now() / dayMs) === span) expect(await expiries()).toEqual(before);
  });

  it("streams a 100,000-item NDJSON batch through the API in bounded memory", async () => {
    const N = 100_000;
    const pid = stack.api.child.pid ?? 0;
    // a small batch first: what the API starts for any NDJSON batch (its parse thread) is
    // not memory in the size of this one
    const warm = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: JSON.stringify({ key: "warm", features: samples.digits.inputs[0] }),
    });
    expect(warm.status).toBe(202);
    const before = rssMb(pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMb(pid));
    }, 100);
    const encoder = new TextEncoder();
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= N) return controller.close();
        const lines: string[] = [];
        for (let i = 0; i < 1_000 && sent < N; i++, sent++) {
          lines.push(
            JSON.stringify({ key: `k${sent}`, features: samples.digits.inputs[sent % 64] }),
          );
        }
        controller.enqueue(encoder.encode(`${lines.join("\n")}\n`));
      },
    });
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(202);
    const { id, total } = (await res.json()) as { id: string; total: number };
    expect(total).toBe(N);
    await stack.batchCompleted(id, 120_000);
    clearInterval(sampler);
    expect(await stack.batchStatus(id)).toMatchObject({ total: N, succeeded: N, failed: 0 });
    console.log(
      `API RSS: ${before.toFixed(0)} MB before, ${peak.toFixed(0)} MB at peak, for ${N} items`,
    );
    expect(exited(stack.api.child)).toBe(false); // alive within its 64 MB heap (V8 aborts past it)
    expect(peak - before).toBeLessThan(100);
    const stored = (await (await fetch(stack.url("/v1/predictions/digits/k99999"))).json()) as {
      prediction: number;
    };
    expect(typeof stored.prediction).toBe("number");
  }, 180_000);

  it("runs an OpenAI batch of 50,000 predict lines through the same 64 MB API, file and answers streamed", async () => {
    const N = 50_000;
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const pid = stack.api.child.pid ?? 0;
    const before = rssMb(pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMb(pid));
    }, 100);
    const lines: string[] = [];
    for (let k = 0; k < N; k++)
      lines.push(
        JSON.stringify({
          custom_id: `r${k}`,
          method: "POST",
          url: "/v1/models/digits/predict",
          body: { features: samples.digits.inputs[k % 64] },
        }),
      );
    const started = Date.now();
    const file = await openai.files.create({
      file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "rows.jsonl"),
      purpose: "batch",
    });
    const uploaded = Date.now();
    let batch = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/models/digits/predict" as "/v1/chat/completions",
      completion_window: "24h",
    });
    await waitFor(async () => {
      batch = await openai.batches.retrieve(batch.id);
      return batch.status === "completed";
    }, 170_000);
    clearInterval(sampler);
    expect(batch.request_counts).toEqual({ total: N, completed: N, failed: 0 });
    const output = await (await openai.files.content(batch.output_file_id ?? "")).text();
    const ids = new Set<string>();
    for (const line of output.split("\n")) {
      if (line === "") continue;
      ids.add((JSON.parse(line) as { custom_id: string }).custom_id);
    }
    expect(ids.size).toBe(N);
    const rate = Math.round(N / ((Date.now() - uploaded) / 1000));
    console.log(
      `OpenAI batch of ${N}: uploaded in ${uploaded - started} ms, ${rate} lines/s; API RSS ${before.toFixed(0)} MB before, ${peak.toFixed(0)} MB at peak`,
    );
    expect(exited(stack.api.child)).toBe(false);
    expect(peak - before).toBeLessThan(100);
  }, 240_000);

  it("reads a JSON batch off the API's loop: 7 MB bodies sent back to back leave the API's other requests at their pace, and a bad last item queues nothing", async () => {
    // each body was parsed and checked on the loop (~280 ms of it for 7 MB): a neighbour's
    // predict p50 went from 0.4 to 24 ms (scratch)
    const items = Array.from({ length: 40_000 }, (_, k) => ({
      key: `j${k}`,
      features: samples.digits.inputs[k % 64],
    }));
    (items[items.length - 1] as { features: unknown }).features = [1, 2];
    const body = JSON.stringify({ model: "digits", items });
    expect(body.length).toBeGreaterThan(6_000_000);
    const predictMs = async (ms: number, more: () => boolean = () => false) => {
      const took: number[] = [];
      for (const end = performance.now() + ms; performance.now() < end || more(); ) {
        const started = performance.now();
        const res = await stack.post("/v1/models/digits/predict", {
          features: samples.digits.inputs[took.length % 64],
        });
        expect(res.status).toBe(200);
        took.push(performance.now() - started);
      }
      return took.sort((a, b) => a - b)[Math.floor(took.length / 2)] ?? Number.NaN;
    };
    const alone = await predictMs(1_500);
    let sending = true;
    const refusals: string[] = [];
    const sender = (async () => {
      while (sending) {
        const res = await fetch(stack.url("/v1/batches"), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        if (res.status === 400)
          refusals.push(((await res.json()) as { error: { message: string } }).error.message);
        else await res.arrayBuffer();
      }
    })();
    // for 4 s, and until two bodies were read whole beside them: the parse thread runs at a
    // lower priority than the loop (PARSE_THREAD_NICE), and on a busy machine it reads fewer
    const lastAt = performance.now() + 40_000;
    const beside = await predictMs(4_000, () => refusals.length < 2 && performance.now() < lastAt);
    sending = false;
    await sender;
    expect(refusals.length).toBeGreaterThan(1);
    expect(new Set(refusals)).toEqual(new Set(["item 40000 needs 64 finite features"]));
    expect(beside).toBeLessThan(3 * alone + 8);
    expect(exited(stack.api.child)).toBe(false);
    // refused before anything was queued: no batch of these keys ever ran
    const stored = await fetch(stack.url("/v1/predictions/digits/j0"));
    expect(stored.status).toBe(404);
  }, 60_000);

  it("a JSON batch's value its model's datatype cannot hold is a 400 naming the item and its place", async () => {
    const row = [...(samples.digits.inputs[0] ?? [])];
    const items = Array.from({ length: 600 }, (_, k) => ({ key: `v${k}`, features: row }));
    items[300] = { key: "v300", features: row.map((v, i) => (i === 3 ? 1e39 : v)) };
    const res = await stack.post("/v1/batches", { model: "digits", items });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /^item 301: value 1e\+39 at index 3 does not fit FP32/,
    );
    // the first bad item is the one named, whatever is wrong with a later one
    const first = await stack.post("/v1/batches", {
      model: "digits",
      items: [{ key: "a", features: [1, 2] }, { features: row }],
    });
    expect(first.status).toBe(400);
    expect(((await first.json()) as { error: { message: string } }).error.message).toBe(
      "item 1 needs 64 finite features",
    );
  });

  it("rejects a bad item, naming its line", async () => {
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: `${JSON.stringify({ key: "a", features: samples.digits.inputs[0] })}\n{"key":"b","features":[1,2]}\n`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /item 2 needs 64 finite features/,
    );
  });

  it("numbers a bad line past the first megabytes from the body's start (blank lines counted)", async () => {
    const good = (k: number) =>
      JSON.stringify({ key: `g${k}`, features: samples.digits.inputs[k % 64] });
    // ~3 MB: the bad line is parsed in a later segment than the first
    const lines = Array.from({ length: 15_000 }, (_, k) => good(k));
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: `${lines.join("\n")}\n\n{"key":"bad",\n${good(1)}\n`,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /^line 15002 is not valid JSON/,
    );
    const item = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: `${lines.join("\n")}\n\n{"key":"bad","features":[1]}\n`,
    });
    expect(((await item.json()) as { error: { message: string } }).error.message).toMatch(
      /^item 15001 needs 64 finite features/,
    );
    // a key whose bytes are not UTF-8: refused, as an input file's are, not read as U+FFFD
    const notUtf8 = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: Buffer.concat([
        Buffer.from(`${lines.join("\n")}\n{"key":"k`),
        Buffer.from([0xff]),
        Buffer.from(`","features":${JSON.stringify(samples.digits.inputs[0])}}\n`),
      ]),
    });
    expect(notUtf8.status).toBe(400);
    expect(((await notUtf8.json()) as { error: { message: string } }).error.message).toMatch(
      /^line 15001 is not UTF-8/,
    );
  });
});
