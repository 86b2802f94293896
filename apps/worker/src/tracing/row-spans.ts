import type { InferRow } from "@ferry/protocol";
import {
  contextOf,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  trace,
  tracer,
} from "@ferry/telemetry";

/** Where one classifier row's time went on this worker, as the batcher measured it. */
export interface RowTimes {
  /** Epoch ms the API accepted the row (its job's accepted_at). */
  acceptedAt: number;
  /** In the batcher, waiting for a batch to form and an instance to run it, in ms. */
  queueMs: number;
  computeMs: number;
  batchSize: number;
}

/**
 * A row's span in its request's trace, written once its answer is back: `queue`, from the
 * API's accept to the start of the batch run that carried it (Triton's queue time: Redis and
 * the transport, then the dynamic batcher), with the pick-up's share as an attribute and a
 * link to that batch's span, whose child is the model run. One span a row, not one per stage:
 * spans cost a traced request its throughput (`npm run bench -- tracing`), and the batch's
 * own spans already hold the run. Nothing when the row carries no trace.
 */
export function recordRowSpans(
  row: Pick<InferRow, "trace" | "rid">,
  model: string,
  version: string,
  times: RowTimes,
  batch: SpanContext | undefined,
  doneAt = Date.now(),
): void {
  if (!row.trace) return;
  const runAt = doneAt - times.computeMs;
  const pickedAt = Math.max(times.acceptedAt, runAt - times.queueMs);
  tracer()
    .startSpan(
      "queue",
      {
        kind: SpanKind.INTERNAL,
        startTime: times.acceptedAt,
        attributes: {
          "ferry.model": model,
          "ferry.model.version": version,
          "ferry.row": row.rid,
          "messaging.system": "redis",
          "ferry.queue.pickup_ms": pickedAt - times.acceptedAt,
          "ferry.batch.size": times.batchSize,
        },
        ...(batch ? { links: [{ context: batch }] } : {}),
      },
      contextOf(row.trace),
    )
    .end(runAt);
}

/**
 * One batch run's span: a trace of its own, linked to the trace of every request it carried
 * (OpenTelemetry's batch-processing pattern; a request of several rows linked once), with
 * its size and model version; the model run is its child. Sampled as its links are
 * (`LinksDecideRoots`): recorded when a request it carried is. Undefined when no row of it
 * is traced.
 */
export function startBatchSpan(
  model: string,
  version: string,
  rows: ReadonlyArray<{ trace?: InferRow["trace"] }>,
): Span | undefined {
  const links: Link[] = [];
  const linked = new Set<string>();
  for (const row of rows) {
    const context = row.trace ? trace.getSpanContext(contextOf(row.trace)) : undefined;
    if (context === undefined || linked.has(context.spanId)) continue;
    linked.add(context.spanId);
    links.push({ context });
  }
  if (links.length === 0) return undefined;
  return tracer().startSpan(`batch ${model}`, {
    kind: SpanKind.INTERNAL,
    links,
    attributes: {
      "ferry.model": model,
      "ferry.model.version": version,
      "ferry.batch.size": rows.length,
    },
  });
}

/** The model run inside a batch's span. */
export function startModelRunSpan(batch: Span, model: string): Span {
  return tracer().startSpan(
    `run ${model}`,
    { kind: SpanKind.INTERNAL },
    trace.setSpan(contextOf(undefined), batch),
  );
}
