import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import {
  type BatchOptions,
  batchOptionsFrom,
  EncodingSpanProcessor,
} from "./encoding-span-processor.js";
import type { WrittenRequest } from "./otlp-exporter.js";

/** A provider whose spans go to `processor`, and beside it to memory (what was ended). */
function provider(processor: EncodingSpanProcessor, sampled = true) {
  const ended = new InMemorySpanExporter();
  const p = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "t" }),
    spanProcessors: [new SimpleSpanProcessor(ended), processor],
    ...(sampled ? {} : { sampler: new AlwaysOffSampler() }),
  });
  return { tracer: p.getTracer("ferry"), ended };
}

/** A sender that records each request and answers when told (or at once). */
function sender(answerAtOnce = true) {
  const sent: WrittenRequest[] = [];
  const pending: Array<() => void> = [];
  const send = (request: WrittenRequest) => {
    sent.push(request);
    return answerAtOnce ? Promise.resolve() : new Promise<void>((r) => pending.push(r));
  };
  return { sent, pending, send };
}

const options = (o: Partial<BatchOptions> = {}): BatchOptions => ({
  maxExportBatchSize: 4,
  maxQueueSize: 16,
  scheduledDelayMillis: 60_000,
  ...o,
});

const bytesOf = (spans: ReadableSpan[]) =>
  Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) as Uint8Array).toString("hex");

describe("EncodingSpanProcessor: spans written as they end, sent a batch at a time", () => {
  it("sends a full batch as the request the library would write for those spans", async () => {
    const { sent, send } = sender();
    const processor = new EncodingSpanProcessor(send, options());
    const { tracer, ended } = provider(processor);
    for (let k = 0; k < 9; k++) tracer.startSpan(`s${k}`, { attributes: { k } }).end();
    await processor.forceFlush();
    expect(sent.map((r) => r.spans)).toEqual([4, 4, 1]);
    const spans = ended.getFinishedSpans();
    expect(sent.map((r) => Buffer.from(r.bytes).toString("hex"))).toEqual([
      bytesOf(spans.slice(0, 4)),
      bytesOf(spans.slice(4, 8)),
      bytesOf(spans.slice(8)),
    ]);
  });

  it("sends what a batch holds once its delay has passed, and nothing for unsampled spans", async () => {
    const { sent, send } = sender();
    const processor = new EncodingSpanProcessor(send, options({ scheduledDelayMillis: 20 }));
    provider(processor).tracer.startSpan("alone").end();
    provider(processor, false).tracer.startSpan("not sampled").end();
    expect(sent).toEqual([]);
    await new Promise((r) => setTimeout(r, 60));
    expect(sent.map((r) => r.spans)).toEqual([1]);
  });

  it("keeps one request in flight, and drops spans past the queue's size until requests go", async () => {
    const { sent, pending, send } = sender(false);
    const processor = new EncodingSpanProcessor(send, options({ maxQueueSize: 8 }));
    const { tracer } = provider(processor);
    const tick = () => new Promise((r) => setImmediate(r));
    for (let k = 0; k < 12; k++) tracer.startSpan(`s${k}`).end();
    await tick();
    // 8 queued (two batches: one sent, one waiting), 4 dropped
    expect(sent.map((r) => r.spans)).toEqual([4]);
    pending.shift()?.();
    await tick();
    expect(sent.map((r) => r.spans)).toEqual([4, 4]);
    pending.shift()?.();
    await tick();
    for (let k = 0; k < 4; k++) tracer.startSpan(`later ${k}`).end();
    await tick();
    expect(sent.map((r) => r.spans)).toEqual([4, 4, 4]);
    pending.shift()?.();
    await processor.forceFlush();
    expect(sent.reduce((n, r) => n + r.spans, 0)).toBe(12);
  });

  it("shutdown sends what is left, then sends nothing more", async () => {
    const { sent, send } = sender();
    let closed = 0;
    const processor = new EncodingSpanProcessor(send, options(), async () => {
      closed++;
    });
    const { tracer } = provider(processor);
    tracer.startSpan("last").end();
    await processor.shutdown();
    await processor.shutdown();
    tracer.startSpan("after").end();
    await processor.forceFlush();
    expect([sent.map((r) => r.spans), closed]).toEqual([[1], 1]);
  });

  it("writes a batch's resource once its detectors have settled, not as it was when its spans ended", async () => {
    const { sent, send } = sender();
    const processor = new EncodingSpanProcessor(send, options());
    const hostId = new Promise<string>((r) => setTimeout(() => r("host-from-a-detector"), 30));
    const tracer = new BasicTracerProvider({
      resource: resourceFromAttributes({ "service.name": "t", "host.id": hostId }),
      spanProcessors: [processor],
    }).getTracer("ferry");
    tracer.startSpan("early").end();
    await processor.forceFlush();
    expect(Buffer.from(sent[0]?.bytes ?? []).includes("host-from-a-detector")).toBe(true);
  });

  it("reads OTEL_BSP_* as the SDK does, a batch never larger than the queue", () => {
    expect(batchOptionsFrom({})).toEqual({
      maxExportBatchSize: 512,
      maxQueueSize: 2048,
      scheduledDelayMillis: 5000,
    });
    expect(
      batchOptionsFrom({
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1000",
        OTEL_BSP_MAX_QUEUE_SIZE: "100",
        OTEL_BSP_SCHEDULE_DELAY: "250",
      }),
    ).toEqual({ maxExportBatchSize: 100, maxQueueSize: 100, scheduledDelayMillis: 250 });
    expect(batchOptionsFrom({ OTEL_BSP_SCHEDULE_DELAY: "soon" }).scheduledDelayMillis).toBe(5000);
  });
});
