import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OtlpReceiver, type ReceivedSpan } from "./helpers/otlp-receiver.js";
import { samples } from "./helpers/samples.js";
import { readSse } from "./helpers/sse.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Ferry pointed at an OTLP/HTTP receiver by the standard variables alone: the API exports
// protobuf (the default), the workers JSON, both every 100 ms. Short locks: a killed
// worker's job is taken over within about two seconds.
const receiver = new OtlpReceiver();
let stack: Stack;
beforeAll(async () => {
  await receiver.start();
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "100" };
  stack = new Stack({
    env: { WORKER_MODELS: "digits,tiny-lm", ...otel },
    apiEnv: { OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" },
    workerEnv: {
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      LOCK_DURATION_MS: "2000",
      STALLED_INTERVAL_MS: "1000",
    },
  });
  await stack.start();
});
afterAll(async () => {
  await stack?.stop();
  await receiver.stop();
});

const SERVER = 2;
const features = samples.digits.inputs[0] ?? [];

/** A W3C traceparent of a fresh trace, sampled, as a caller's own tracer would send it. */
function traceparent(): { header: string; traceId: string; spanId: string } {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/** The trace's spans once `ready` holds of them (exports arrive in batches, per process). */
async function spansOf(traceId: string, ready: (spans: ReceivedSpan[]) => boolean) {
  await waitFor(async () => ready(receiver.trace(traceId)), 15_000);
  return receiver.trace(traceId);
}

const named = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);
const only = (spans: ReceivedSpan[], name: string): ReceivedSpan => {
  const found = named(spans, name);
  expect(found, `one span '${name}' in ${spans.map((s) => s.name).join(", ")}`).toHaveLength(1);
  return found[0] as ReceivedSpan;
};
const duration = (s: ReceivedSpan) => s.endMs - s.startMs;
/** Clocks of two processes on one host, and rounding to ms: what "within" tolerates. */
const SLACK_MS = 5;
/** An event-loop turn on a loaded machine (CI's read 5.9 ms between two steps of one worker). */
const TURN_MS = 50;

function expectClassifierRow(spans: ReceivedSpan[], server: ReceivedSpan) {
  const queue = only(spans, "queue");
  expect(queue.parentSpanId).toBe(server.spanId);
  expect(queue.service).toBe("ferry-worker");
  expect(queue.encoding).toBe("json");
  expect(queue.attributes["ferry.model"]).toBe("digits");
  expect(queue.attributes["ferry.model.version"]).toBeTypeOf("string");
  // from the API's accept to its batch's run, inside the request's own span; the pick-up is
  // a part of it
  expect(queue.startMs).toBeGreaterThanOrEqual(server.startMs - SLACK_MS);
  expect(queue.endMs).toBeLessThanOrEqual(server.endMs + SLACK_MS);
  const pickup = queue.attributes["ferry.queue.pickup_ms"] as number;
  expect(pickup).toBeGreaterThanOrEqual(0);
  expect(pickup).toBeLessThanOrEqual(duration(queue) + 1);
  // the batch that ran it: a span of its own trace, linked both ways with this one, whose
  // model run starts where the row's queue ends and ends before the request's answer
  const link = queue.links[0];
  expect(link).toBeDefined();
  const batch = receiver.spans.find((s) => s.spanId === link?.spanId);
  expect(batch?.name).toBe("batch digits");
  expect(batch?.attributes["ferry.batch.size"]).toBeGreaterThanOrEqual(1);
  expect(queue.attributes["ferry.batch.size"]).toBe(batch?.attributes["ferry.batch.size"]);
  expect(batch?.links.some((l) => l.spanId === server.spanId)).toBe(true);
  const run = receiver.spans.find((s) => s.parentSpanId === batch?.spanId);
  expect(run?.name).toBe("run digits");
  // one process's clock: the run starts as the queue ends, a busy machine's turn later at most
  expect(run?.startMs ?? 0).toBeGreaterThanOrEqual(queue.endMs - SLACK_MS);
  expect(run?.startMs ?? 0).toBeLessThanOrEqual(queue.endMs + TURN_MS);
  expect(duration(queue) + duration(run as ReceivedSpan)).toBeLessThanOrEqual(
    duration(server) + SLACK_MS,
  );
}

describe("OpenTelemetry traces across the queue", () => {
  it("a predict: the API's server span under the caller's, the worker's queue under it, the batch and its model run linked", async () => {
    const { header, traceId, spanId } = traceparent();
    const res = await stack.post(
      "/v1/models/digits/predict",
      { features },
      { traceparent: header },
    );
    expect(res.status).toBe(200);
    const spans = await spansOf(traceId, (s) => s.length >= 2);
    const server = only(spans, "POST /v1/models/:name/predict");
    expect(server.kind).toBe(SERVER);
    expect(server.parentSpanId).toBe(spanId);
    expect(server.service).toBe("ferry-api");
    expect(server.encoding).toBe("protobuf");
    expect(server.attributes["http.response.status_code"]).toBe(200);
    expect(server.attributes["http.route"]).toBe("/v1/models/:name/predict");
    expectClassifierRow(spans, server);
  });

  it("a v2 infer, the same way", async () => {
    const { header, traceId } = traceparent();
    const res = await stack.post(
      "/v2/models/digits/infer",
      { inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }] },
      { traceparent: header },
    );
    expect(res.status).toBe(200);
    const spans = await spansOf(traceId, (s) => s.length >= 2);
    expectClassifierRow(spans, only(spans, "POST /v2/models/:name/infer"));
  });

  it("an async job: the worker's spans join the submitting request's trace", async () => {
    const { header, traceId } = traceparent();
    const res = await stack.post(
      "/v1/jobs",
      { model: "digits", input: { features } },
      { traceparent: header },
    );
    expect(res.status).toBe(202);
    const spans = await spansOf(traceId, (s) => s.length >= 2);
    const server = only(spans, "POST /v1/jobs");
    expect(only(spans, "queue").parentSpanId).toBe(server.spanId);
  });

  it("a streamed chat completion: GenAI conventions on the worker's span, waiting, prefill and decode inside, the stream's span as long as the stream", async () => {
    const { header, traceId } = traceparent();
    const res = await stack.post(
      "/v1/chat/completions",
      {
        model: "tiny-lm",
        messages: [{ role: "user", content: "Once upon a time" }],
        max_tokens: 12,
        temperature: 0.5,
        top_p: 0.9,
        seed: 3,
        stream: true,
        ignore_eos: true,
      },
      { traceparent: header },
    );
    expect(res.status).toBe(200);
    let chunks = 0;
    await readSse(res, (e) => {
      if (e.data !== "[DONE]") chunks++;
      return undefined;
    });
    expect(chunks).toBeGreaterThan(0);
    const spans = await spansOf(traceId, (s) => s.length >= 5);
    const server = only(spans, "POST /v1/chat/completions");
    const gen = only(spans, "chat tiny-lm");
    expect(gen.parentSpanId).toBe(server.spanId);
    expect(gen.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "tiny-lm",
      "gen_ai.request.max_tokens": 12,
      "gen_ai.request.temperature": 0.5,
      "gen_ai.request.top_p": 0.9,
      "gen_ai.request.seed": 3,
      "gen_ai.response.finish_reasons": ["length"],
      "gen_ai.usage.output_tokens": 12,
      "ferry.job.attempt": 1,
    });
    expect(gen.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
    expect(gen.attributes["gen_ai.response.id"]).toBeTypeOf("string");
    const ttft = gen.attributes["ferry.gen_ai.time_to_first_token_s"] as number;
    const tpot = gen.attributes["ferry.gen_ai.time_per_output_token_s"] as number;
    expect(ttft).toBeGreaterThan(0);
    expect(tpot).toBeGreaterThan(0);
    // no prompt or output text on any span
    for (const s of spans) expect(JSON.stringify(s.attributes)).not.toContain("Once upon a time");
    const waiting = only(spans, "waiting");
    const prefill = only(spans, "prefill");
    const decode = only(spans, "decode");
    for (const s of [waiting, prefill, decode]) expect(s.parentSpanId).toBe(gen.spanId);
    expect(prefill.startMs).toBeCloseTo(waiting.endMs, 0);
    expect(decode.startMs).toBeCloseTo(prefill.endMs, 0);
    // TTFT is the waiting and the prefill, measured from the API's accept
    expect(Math.abs(decode.startMs - gen.startMs - ttft * 1000)).toBeLessThanOrEqual(SLACK_MS);
    expect(decode.attributes["ferry.gen_ai.decode.tokens"]).toBe(11);
    // the stream's span lasts as long as the stream did
    expect(server.endMs).toBeGreaterThanOrEqual(gen.endMs - SLACK_MS);
  });

  it("without a traceparent the API starts the trace", async () => {
    const before = receiver.spans.length;
    // (not the first test's input: its answer is cached, and a cache hit reaches no worker)
    const res = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[1],
    });
    expect(res.status).toBe(200);
    await waitFor(
      async () =>
        receiver.spans
          .slice(before)
          .some((s) => s.name === "POST /v1/models/:name/predict" && s.parentSpanId === ""),
      15_000,
    );
    const server = receiver.spans
      .slice(before)
      .find((s) => s.name === "POST /v1/models/:name/predict" && s.parentSpanId === "");
    const spans = await spansOf(server?.traceId ?? "", (s) => s.length >= 2);
    expect(only(spans, "queue").parentSpanId).toBe(server?.spanId);
  });

  it("a caller's unsampled trace is honoured: nothing is recorded, nor the batch that ran it", async () => {
    const { traceId, spanId } = traceparent();
    const before = receiver.spans.length;
    // an input no other test sends: a cache hit would reach no worker, and no batch
    const res = await stack.post(
      "/v1/models/digits/predict",
      { features: samples.digits.inputs[2] },
      { traceparent: `00-${traceId}-${spanId}-00` },
    );
    expect(res.status).toBe(200);
    expect(((await res.json()) as { source: string }).source).toBe("model");
    await new Promise((r) => setTimeout(r, 1_000));
    expect(receiver.trace(traceId)).toEqual([]);
    const fresh = receiver.spans.slice(before);
    expect(fresh.filter((s) => s.links.some((l) => l.traceId === traceId))).toEqual([]);
    expect(fresh.map((s) => s.name)).not.toContain("batch digits");
  });

  it("probes and scrapes are not traced, a caller's traceparent or not", async () => {
    const { header, traceId } = traceparent();
    const before = receiver.spans.length;
    for (const path of ["/health", "/metrics", "/v2/health/live", "/v2/health/ready"]) {
      const res = await fetch(stack.url(path), { headers: { traceparent: header } });
      await res.text();
    }
    // a request after them is, and its span arrives: the probes' would have come before it
    const res = await stack.post(
      "/v1/models/digits/predict",
      { features },
      { traceparent: header },
    );
    expect(res.status).toBe(200);
    await spansOf(traceId, (s) => s.length >= 1);
    const names = receiver.spans.slice(before).map((s) => s.name);
    expect(names.filter((n) => n.startsWith("GET "))).toEqual([]);
  });

  it("a worker killed mid-completion: the job's takeover appears in the same trace as attempt 2", async () => {
    const { header, traceId } = traceparent();
    const body = (prompt: string) => ({
      model: "tiny-lm",
      prompt,
      max_tokens: 200,
      ignore_eos: true,
      stream: true,
    });
    // beside two others: a job that was alone on a worker that died is failed as the crash's
    // likely cause (poison), not retried
    const others = ["Once upon a time", "Never trust a"].map((p) =>
      stack.post("/v1/completions", body(p)),
    );
    const res = await stack.post("/v1/completions", body("A man walks into a bar"), {
      traceparent: header,
    });
    expect(res.status).toBe(200);
    let tokens = 0;
    let killed = false;
    await readSse(res, (e) => {
      if (e.data === "[DONE]") return undefined;
      tokens++;
      if (!killed && tokens >= 3) {
        killed = true;
        stack.workers[0]?.child.kill("SIGKILL");
        void stack.startWorker();
      }
      return undefined;
    });
    for (const other of await Promise.all(others)) await other.text();
    expect(killed).toBe(true);
    // the API's span and the second worker's come in their own exports, in either order
    const spans = await spansOf(
      traceId,
      (s) =>
        s.some(
          (x) => x.name === "text_completion tiny-lm" && x.attributes["ferry.job.attempt"] === 2,
        ) && s.some((x) => x.name === "POST /v1/completions"),
    );
    const server = only(spans, "POST /v1/completions");
    const retried = named(spans, "text_completion tiny-lm").find(
      (s) => s.attributes["ferry.job.attempt"] === 2,
    );
    expect(retried?.parentSpanId).toBe(server.spanId);
    expect(retried?.attributes["gen_ai.usage.output_tokens"]).toBe(200);
    // its decode counts the tokens drawn on this worker, not those drawn before the kill (its
    // time per token had divided this attempt's time by all 200)
    await spansOf(traceId, (s) =>
      s.some((x) => x.name === "decode" && x.parentSpanId === retried?.spanId),
    );
    const decode = receiver
      .trace(traceId)
      .find((s) => s.name === "decode" && s.parentSpanId === retried?.spanId);
    const drawnHere = decode?.attributes["ferry.gen_ai.decode.tokens"] as number;
    expect(drawnHere).toBeLessThan(199 - 2);
    expect(drawnHere).toBeGreaterThan(0);
    // and no time to first token: the first came from the worker that died
    expect(retried?.attributes["ferry.gen_ai.time_to_first_token_s"]).toBeUndefined();
    expect(retried?.attributes["ferry.gen_ai.time_per_output_token_s"]).toBeGreaterThan(0);
  });
});
