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
  prefixQueries: { inc(n?: number): void };
  prefixHits: { inc(n?: number): void };
}

export function generationMetrics(
  metrics: WorkerMetrics,
  model: string,
  version: string,
): GenerationMetrics {
  const labels = { model, version };
  return {
    ttft: metrics.ttft.labels(labels),
    interToken: metrics.interToken.labels(labels),
    running: metrics.runningSeqs.labels(labels),
    waiting: metrics.waitingSeqs.labels(labels),
    tokens: metrics.tokens.labels(labels),
    cancelled: metrics.cancelledSeqs.labels(labels),
    resumed: metrics.resumedSeqs.labels(labels),
    prefixQueries: metrics.prefixCacheQueries.labels(labels),
    prefixHits: metrics.prefixCacheHits.labels(labels),
  };
}
