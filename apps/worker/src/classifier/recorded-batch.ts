import type { InferRow } from "@ferry/protocol";
import { type SpanContext, SpanStatusCode } from "@ferry/telemetry";
import type { ExecutionStats } from "@ferry/transport";
import type { WorkerMetrics } from "../metrics.js";
import { startBatchSpan, startModelRunSpan } from "../tracing/row-spans.js";
import { type BatchExecutor, Batcher, type BatcherOptions } from "./batcher.js";

/** A row a batcher holds: its trace, to link from its batch's span, and that span once run. */
export interface TracedRow {
  trace?: InferRow["trace"];
  batch?: SpanContext;
}

/**
 * `run` as every model version's batcher runs a batch, recorded the same way for classifiers
 * and embedders: its size and the rows still waiting behind it (sampled once a batch, not
 * twice a row), its compute time as a metric and in Triton's statistics, and its spans (the
 * batch's, linked to every traced row's request, with the model run as its child; each row
 * keeps the batch's context for its own span to link back).
 */
export function recordedBatchRun<R extends TracedRow, O>(
  labels: { model: string; version: string },
  metrics: WorkerMetrics,
  stats: Pick<ExecutionStats, "execution">,
  pending: () => number,
  run: BatchExecutor<R, O>,
): BatchExecutor<R, O> {
  const { model, version } = labels;
  return async (rows) => {
    metrics.batchSize.observe(labels, rows.length);
    metrics.pending.set(labels, pending());
    const end = metrics.computeSeconds.startTimer(labels);
    const started = performance.now();
    // a batch of unsampled requests is not recorded, and its rows link to nothing
    const batch = startBatchSpan(model, version, rows);
    const span = batch?.isRecording() ? batch : undefined;
    const modelRun = span && startModelRunSpan(span, model);
    if (span) for (const row of rows) row.batch = span.spanContext();
    try {
      return await run(rows);
    } catch (err) {
      modelRun?.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
      throw err;
    } finally {
      end();
      modelRun?.end();
      span?.end();
      stats.execution(model, version, rows.length, performance.now() - started);
    }
  };
}

/** A version's batcher, each batch it runs recorded as `recordedBatchRun` says. */
export function recordedBatcher<R extends TracedRow, O>(
  labels: { model: string; version: string },
  metrics: WorkerMetrics,
  stats: Pick<ExecutionStats, "execution">,
  run: BatchExecutor<R, O>,
  options: BatcherOptions<R>,
): Batcher<R, O> {
  const batcher: Batcher<R, O> = new Batcher(
    recordedBatchRun(labels, metrics, stats, () => batcher.pending, run),
    options,
  );
  return batcher;
}
