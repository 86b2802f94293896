import type { ExecutionStats } from "@ferry/transport";
import type { WorkerMetrics } from "../metrics.js";

/** The generation metrics of one model version, with its labels bound. */
export interface GenerationMetrics {
  ttft: { observe(seconds: number): void };
  interToken: { observe(seconds: number): void };
  running: { set(n: number): void };
  waiting: { set(n: number): void };
  tokens: { inc(n?: number): void };
  cancelled: { inc(n?: number): void };
  resumed: { inc(n?: number): void };
  preempted: { inc(n?: number): void };
  prefixQueries: { inc(n?: number): void };
  prefixHits: { inc(n?: number): void };
  /** One run of the model over `size` sequences (a decode step, or a prefill) that took `ms`. */
  execution(size: number, ms: number): void;
  /**
   * A sequence that ended (`failed`: with an error other than a cancel), after `queueMs`
   * waiting for its seat and `totalMs` in all since it reached the engine.
   */
  finished(queueMs: number, totalMs: number, failed: boolean): void;
}

export function generationMetrics(
  metrics: WorkerMetrics,
  model: string,
  version: string,
  stats?: Pick<ExecutionStats, "execution" | "row" | "request">,
): GenerationMetrics {
  const labels = { model, version };
  return {
    execution: (size, ms) => stats?.execution(model, version, size, ms),
    finished: (queueMs, totalMs, failed) => {
      if (!failed) stats?.row(model, version, queueMs);
      stats?.request(model, version, totalMs, failed);
    },
    ttft: metrics.ttft.labels(labels),
    interToken: metrics.interToken.labels(labels),
    running: metrics.runningSeqs.labels(labels),
    waiting: metrics.waitingSeqs.labels(labels),
    tokens: metrics.tokens.labels(labels),
    cancelled: metrics.cancelledSeqs.labels(labels),
    resumed: metrics.resumedSeqs.labels(labels),
    preempted: metrics.preemptedSeqs.labels(labels),
    prefixQueries: metrics.prefixCacheQueries.labels(labels),
    prefixHits: metrics.prefixCacheHits.labels(labels),
  };
}
