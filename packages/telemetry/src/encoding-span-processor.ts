import { type Context, diag, TraceFlags } from "@opentelemetry/api";
import type { ReadableSpan, Span, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { WrittenRequest } from "./otlp-exporter.js";
import { SpanBatch } from "./otlp-protobuf.js";

/** Sends one ExportTraceServiceRequest; resolves once it is answered (or given up on). */
export type SendRequest = (request: WrittenRequest) => Promise<void>;

/** The batching the standard OTEL_BSP_* variables set, with the SDK's defaults. */
export interface BatchOptions {
  maxExportBatchSize: number;
  maxQueueSize: number;
  scheduledDelayMillis: number;
}

export function batchOptionsFrom(env: NodeJS.ProcessEnv): BatchOptions {
  const read = (name: string, fallback: number) => {
    const value = Number(env[name]);
    return Number.isFinite(value) && value > 0 ? value : fallback;
  };
  const maxQueueSize = read("OTEL_BSP_MAX_QUEUE_SIZE", 2048);
  return {
    maxQueueSize,
    maxExportBatchSize: Math.min(read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), maxQueueSize),
    scheduledDelayMillis: read("OTEL_BSP_SCHEDULE_DELAY", 5000),
  };
}

/**
 * The SDK's batch span processor's behaviour (a batch sent when it is full or its delay has
 * passed, one request in flight, spans past the queue's size dropped), with each sampled span
 * written as OTLP protobuf the moment it ends rather than held as an object until its batch
 * leaves: held, a request's spans outlived two or three young-generation collections and were
 * copied and promoted on the way, which cost a traced worker a tenth of its time per row.
 */
export class EncodingSpanProcessor implements SpanProcessor {
  private batch = new SpanBatch();
  /** Batches sealed and not yet sent, oldest first. */
  private readonly waiting: SpanBatch[] = [];
  private queued = 0;
  private sending: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private dropped = 0;

  constructor(
    private readonly send: SendRequest,
    private readonly options: BatchOptions,
    private readonly close: () => Promise<void> = async () => {},
  ) {}

  onStart(_span: Span, _parent: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (this.stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.options.maxQueueSize) {
      if (this.dropped++ === 0)
        diag.warn("Dropping spans: more ended than the exporter sends (OTEL_BSP_MAX_QUEUE_SIZE)");
      return;
    }
    this.batch.add(span);
    this.queued++;
    if (this.batch.size >= this.options.maxExportBatchSize) {
      this.seal();
      this.pump();
    } else
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.seal();
        this.pump();
      }, this.options.scheduledDelayMillis).unref();
  }

  async forceFlush(): Promise<void> {
    this.seal();
    while (this.waiting.length > 0 || this.sending) {
      this.pump();
      await this.sending;
    }
  }

  async shutdown(): Promise<void> {
    if (this.stopped) return;
    await this.forceFlush();
    this.stopped = true;
    await this.close();
  }

  /** The spans written so far become a request of their own. */
  private seal(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.batch.size === 0) return;
    this.waiting.push(this.batch);
    this.batch = new SpanBatch();
  }

  /** Sends the oldest request waiting, unless one is on its way (then the next follows it). */
  private pump(): void {
    if (this.sending) return;
    const next = this.waiting.shift();
    if (!next) return;
    const spans = next.size;
    this.sending = written(next)
      .then((request) => this.send(request))
      .catch((err: unknown) => diag.error("Exporting spans failed", err))
      .finally(() => {
        this.queued -= spans;
        this.sending = undefined;
        this.pump();
      });
  }
}

/**
 * A batch's request, once its resources' attributes have settled (a detector may still be
 * reading the host's id when a process's first spans end): written before, it would lack them.
 */
async function written(batch: SpanBatch): Promise<WrittenRequest> {
  for (const resource of batch.resources())
    if (resource.asyncAttributesPending) await resource.waitForAsyncAttributes?.();
  const spans = batch.size;
  return { bytes: batch.take(), spans };
}
