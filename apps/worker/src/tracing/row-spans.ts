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
 * A row's spans in its request's trace, written once its answer is back: `queue` (from the
 * API's accept to this worker's pick-up: Redis and the transport), `batch wait` (in the
 * dynamic batcher) and `infer` (its batch's model run, linked to the batch's span). Nothing
 * when the row carries no trace (tracing off, or not sampled upstream).
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
  const parent = contextOf(row.trace);
  const inferAt = doneAt - times.computeMs;
  const batchAt = inferAt - times.queueMs;
  const pickedAt = Math.max(times.acceptedAt, batchAt);
  const attributes = {
    "ferry.model": model,
    "ferry.model.version": version,
    "ferry.row": row.rid,
  };
  const span = (name: string, start: number, end: number, extra: object = {}, links?: Link[]) =>
    tracer()
      .startSpan(
        name,
        {
          kind: SpanKind.INTERNAL,
          startTime: start,
          attributes: { ...attributes, ...extra },
          ...(links ? { links } : {}),
        },
        parent,
      )
      .end(end);
  span("queue", times.acceptedAt, pickedAt, { "messaging.system": "redis" });
  span("batch wait", pickedAt, inferAt);
  span(
    "infer",
    inferAt,
    doneAt,
    { "ferry.batch.size": times.batchSize },
    batch ? [{ context: batch }] : undefined,
  );
}

/**
 * One batch run's span: a trace of its own, linked to the trace of every request it carried
 * (OpenTelemetry's batch-processing pattern), with its size and model version; the model
 * run is its child. Undefined when no row of it is traced.
 */
export function startBatchSpan(
  model: string,
  version: string,
  rows: ReadonlyArray<{ trace?: InferRow["trace"] }>,
): Span | undefined {
  const links: Link[] = [];
  for (const row of rows) {
    const context = row.trace ? trace.getSpanContext(contextOf(row.trace)) : undefined;
    if (context) links.push({ context });
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
