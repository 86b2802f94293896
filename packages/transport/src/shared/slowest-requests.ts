/** One of a model version's slowest recent requests, and where its time went. */
export interface SlowRequest {
  /** The request's id (X-Request-Id), or a completion's job id. */
  id: string;
  /** When it ended, epoch ms. */
  at: number;
  total_ms: number;
  /** It ended in an error (a cancel is not one, and is not counted). */
  failed?: boolean;
  /** From the API's accept to a worker's pick-up: Redis and the transport. */
  queue_ms?: number;
  /** Waiting to join a batch: the batcher's wait, or a completion's for its seat. */
  batch_ms?: number;
  /** In the model. */
  compute_ms?: number;
  /** A completion's first token, from its accept. */
  ttft_ms?: number;
  /** A completion's output tokens. */
  tokens?: number;
}

/** Where a request's time went, as far as it is known. */
export type Parts = {
  [K in "queue_ms" | "batch_ms" | "compute_ms" | "ttft_ms" | "tokens"]?: number | undefined;
};

/** What a request's parts are read from, only if it is slow enough to be kept. */
export interface RequestParts {
  breakdown(): Parts;
}

/** How many slowest requests are kept per model version and minute, and shown. */
export const SLOWEST_KEPT = 10;

/**
 * The slowest requests one process saw since its last flush: at most SLOWEST_KEPT, so a
 * request faster than all of them costs one comparison and no allocation.
 */
export class SlowestList {
  readonly entries: SlowRequest[] = [];
  private floorMs = 0;

  /** A request that ended `at` (epoch ms) after `totalMs`: kept if among the slowest. */
  offer(
    id: string,
    at: () => number,
    totalMs: number,
    failed: boolean,
    parts: RequestParts | undefined,
  ): void {
    if (this.entries.length >= SLOWEST_KEPT && totalMs <= this.floorMs) return;
    const entry: SlowRequest = {
      id,
      at: at(),
      total_ms: round2(totalMs),
      ...(failed ? { failed } : {}),
      ...roundParts(parts?.breakdown() ?? {}),
    };
    if (this.entries.length >= SLOWEST_KEPT) {
      const fastest = this.entries.findIndex((e) => e.total_ms === this.floorMs);
      this.entries.splice(fastest, 1);
    }
    this.entries.push(entry);
    this.floorMs = Math.min(...this.entries.map((e) => e.total_ms));
  }
}

/** The parts that are known, rounded to 0.01 ms (a token count stays whole). */
function roundParts(parts: Parts): Partial<SlowRequest> {
  const out: Partial<Record<keyof Parts, number>> = {};
  for (const [k, v] of Object.entries(parts) as Array<[keyof Parts, number | undefined]>)
    if (v !== undefined) out[k] = round2(v);
  return out;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
