import {
  type Attributes,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { TraceState } from "@opentelemetry/core";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { serializeSpans } from "./otlp-protobuf.js";

/** Spans as the SDK ends them, from a provider of their own with `resource`'s attributes. */
function record(
  resource: Attributes,
  make: (provider: BasicTracerProvider) => void,
): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    spanLimits: { attributeCountLimit: 4, eventCountLimit: 2, linkCountLimit: 3 },
  });
  make(provider);
  return exporter.getFinishedSpans();
}

/** Every kind of attribute value OTLP has, and the edges of each encoding. */
const VALUES: Attributes = {
  text: "a route: POST /v1/models/:name/predict",
  unicode: "é😀 ∑ 中文",
  long: "x".repeat(300),
  longUnicode: "é".repeat(200),
  empty: "",
  int: 42,
  zero: 0,
  negative: -7,
  big: 2 ** 40 + 3,
  min: Number.MIN_SAFE_INTEGER,
  double: 0.5539277712233008,
  negativeDouble: -1e-300,
  yes: true,
  no: false,
  strings: ["a", "é", ""],
  numbers: [1, 2.5, -3],
  booleans: [true, false],
  gap: undefined,
};

const remote = {
  traceId: "0af7651916cd43dd8448eb211c80319c",
  spanId: "b7ad6b7169203331",
  traceFlags: TraceFlags.SAMPLED,
  isRemote: true,
  traceState: new TraceState("vendor=abc,other=1"),
};

function spansOfEveryShape(): ReadableSpan[] {
  return record({ "service.name": "ferry-test", "host.name": "hé", pid: 123 }, (provider) => {
    const tracer = provider.getTracer("ferry", "1.2.3", { schemaUrl: "https://example/s" });
    const other = provider.getTracer("other");
    const parent = trace.setSpanContext(ROOT_CONTEXT, remote);
    const root = tracer.startSpan(
      "POST /v1/models/:name/predict",
      { kind: SpanKind.SERVER, attributes: VALUES, startTime: [1_764_000_000, 123_456_789] },
      parent,
    );
    root.addEvent("first token", { "gen_ai.token": 1, at: 0.25 }, [1_764_000_000, 999_999_999]);
    root.addEvent("no attributes");
    root.addEvent("one too many (dropped)");
    root.setStatus({ code: SpanStatusCode.ERROR, message: "queue full: ça déborde" });
    root.end([1_764_000_001, 5]);
    for (const kind of [SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER])
      other
        .startSpan(`kind ${kind}`, {
          kind,
          links: [
            { context: remote, attributes: { why: "carried" } },
            {
              context: {
                traceId: remote.traceId,
                spanId: remote.spanId,
                traceFlags: 1,
                isRemote: false,
              },
            },
          ],
        })
        .end();
    const batch = tracer.startSpan("batch mnist", {
      links: Array.from({ length: 5 }, (_, k) => ({
        context: { ...remote, spanId: `00000000000000${(k + 16).toString(16)}` },
      })),
      attributes: { "ferry.batch.size": 5 },
    });
    batch.end();
  });
}

describe("serializeSpans: OTLP protobuf as OpenTelemetry JS writes it", () => {
  it("writes the library's bytes for spans of every shape: kinds, events, links, status, trace state, remote parents, dropped counts, each kind of attribute value, two scopes", () => {
    const spans = spansOfEveryShape();
    expect(spans.length).toBe(6);
    const ours = Buffer.from(serializeSpans(spans));
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) as Uint8Array);
    expect(ours.toString("hex")).toBe(theirs.toString("hex"));
  });

  it("writes the library's bytes for a batch whose messages need multi-byte lengths, across resources, and again for the next batch", () => {
    const many = record({ "service.name": "api" }, (provider) => {
      const tracer = provider.getTracer("ferry");
      for (let k = 0; k < 600; k++)
        tracer
          .startSpan(`queue ${k}`, {
            attributes: { "ferry.row": `r${k}`, "ferry.queue.pickup_ms": k / 7, k },
            links: [{ context: remote }],
          })
          .end();
    });
    const worker = record({ "service.name": "worker" }, (provider) => {
      provider.getTracer("ferry").startSpan("run mnist").end();
    });
    const batch = [...many.slice(0, 300), ...worker, ...many.slice(300)];
    for (const spans of [batch, many.slice(0, 2), batch]) {
      const ours = Buffer.from(serializeSpans(spans));
      const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) as Uint8Array);
      expect(ours.equals(theirs)).toBe(true);
    }
  });

  it("gives each call its own bytes: a batch still being sent is not written over by the next", () => {
    const spans = spansOfEveryShape();
    const first = serializeSpans(spans);
    const copy = Buffer.from(first);
    serializeSpans(spans.slice(1));
    expect(Buffer.from(first).equals(copy)).toBe(true);
  });
});
