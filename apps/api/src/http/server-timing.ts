import type { CompletionResult, RowTiming } from "@ferry/protocol";

type GenerationTiming = NonNullable<CompletionResult["timing"]>;

/**
 * Where a synchronous answer's time went, for its `Server-Timing` header (W3C), so that
 * devtools or `curl -v` show it without a collector: `queue` (Redis and the transport, to a
 * worker's pick-up), `batch` (waiting to join a batch), `infer` (the model), `total` (in this
 * API, from the request's arrival). Several rows or choices: the slowest of each.
 */
export class ServerTiming {
  private readonly started = performance.now();
  private queueMs: number | undefined;
  private batchMs: number | undefined;
  private inferMs: number | undefined;
  private cacheHit = false;

  /** A classifier row's timing, as its worker measured it. */
  row(timing: RowTiming): void {
    if (timing.wait_ms !== undefined) this.queueMs = max(this.queueMs, timing.wait_ms);
    this.batchMs = max(this.batchMs, timing.queue_ms);
    this.inferMs = max(this.inferMs, timing.compute_ms);
  }

  /** A completion's timing, as its worker measured it. */
  generation(timing: GenerationTiming | undefined): void {
    if (!timing) return;
    this.queueMs = max(this.queueMs, timing.queue_ms);
    this.batchMs = max(this.batchMs, timing.batch_ms);
    this.inferMs = max(this.inferMs, timing.infer_ms);
  }

  /** The answer came from the prediction cache: no worker took part. */
  cached(): void {
    this.cacheHit = true;
  }

  /** The parts as the version's slowest recent requests keep them (the dashboard's). */
  breakdown(): {
    queue_ms: number | undefined;
    batch_ms: number | undefined;
    compute_ms: number | undefined;
  } {
    return { queue_ms: this.queueMs, batch_ms: this.batchMs, compute_ms: this.inferMs };
  }

  /** Whether anything was measured: a route that answered from neither sends no header. */
  get measured(): boolean {
    return this.cacheHit || this.inferMs !== undefined;
  }

  header(): string {
    const parts: string[] = [];
    if (this.cacheHit) parts.push('cache;desc="hit"');
    if (this.queueMs !== undefined) parts.push(`queue;dur=${round(this.queueMs)}`);
    if (this.batchMs !== undefined) parts.push(`batch;dur=${round(this.batchMs)}`);
    if (this.inferMs !== undefined) parts.push(`infer;dur=${round(this.inferMs)}`);
    parts.push(`total;dur=${round(performance.now() - this.started)}`);
    return parts.join(", ");
  }
}

function max(a: number | undefined, b: number): number {
  return a === undefined ? b : Math.max(a, b);
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
