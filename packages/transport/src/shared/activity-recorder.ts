import { queueName } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";
import { LatencySketch } from "./latency-sketch.js";
import { type RequestParts, SLOWEST_KEPT, SlowestList } from "./slowest-requests.js";
import { perVersion } from "./version-counters.js";

/** The dashboard's time series: one point per step, over the window. */
export const ACTIVITY_STEP_MS = 2_000;
export const ACTIVITY_WINDOW_MS = 5 * 60_000;
/** Slowest requests are kept by the minute: a window's worth of minute lists is read. */
export const SLOWEST_SPAN_MS = 60_000;
/** Past the window, a step's or a minute's key goes: a step longer, for the last reader. */
const TTL_S = Math.ceil((ACTIVITY_WINDOW_MS + SLOWEST_SPAN_MS + ACTIVITY_STEP_MS) / 1000);

/** Fields of a step's hash. */
export const activityField = {
  requests: "req",
  errors: "err",
  tokens: "tok",
  depthSum: "depth_sum",
  depthSamples: "depth_n",
  latency: (bucket: number) => `lat:${bucket}`,
};

interface Pending {
  queue: string;
  requests: number;
  errors: number;
  tokens: number;
  latency: LatencySketch;
  slowest: SlowestList;
}

/**
 * What one process adds to each model version's recent activity: requests, errors and
 * their latency sketch, tokens, queue depth samples, and its slowest requests. Counted in
 * process and added once per flush (a MULTI per version, none per request), into the step of
 * the flush: every process's counts for a version meet in the same keys and add up.
 */
export class ActivityRecorder {
  private pending = new Map<string, Map<string, Pending>>();
  /** queue -> depth samples since the last flush */
  private depths = new Map<string, { sum: number; n: number }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * One request of `version` of `model` that took `ms`; `bucket` is its LatencySketch
   * bucket. With an id it may join the slowest, its parts read only then.
   */
  request(
    model: string,
    version: string,
    ms: number,
    bucket: number,
    failed: boolean,
    id?: string,
    parts?: RequestParts,
  ): void {
    const p = this.of(model, version);
    p.requests++;
    if (failed) p.errors++;
    p.latency.addBucket(bucket, 1);
    if (id !== undefined) p.slowest.offer(id, this.now, ms, failed, parts);
  }

  tokens(model: string, version: string, n: number): void {
    this.of(model, version).tokens += n;
  }

  /** A sample of a queue's waiting work (each step's depth is the mean of its samples). */
  depth(queue: string, waiting: number): void {
    const d = this.depths.get(queue) ?? { sum: 0, n: 0 };
    d.sum += waiting;
    d.n++;
    this.depths.set(queue, d);
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0 && this.depths.size === 0) return;
    const now = this.now();
    const step = Math.floor(now / ACTIVITY_STEP_MS);
    const minute = Math.floor(now / SLOWEST_SPAN_MS);
    const byQueue = new Map<string, Pending | undefined>();
    for (const versions of this.pending.values())
      for (const p of versions.values()) byQueue.set(p.queue, p);
    for (const queue of this.depths.keys()) if (!byQueue.has(queue)) byQueue.set(queue, undefined);
    const depths = this.depths;
    this.pending = new Map();
    this.depths = new Map();
    const writes: Array<Promise<unknown>> = [];
    for (const [queue, p] of byQueue) {
      // one MULTI: a key never exists without its TTL, even if the connection drops mid-way
      const multi = this.redis.multi();
      const key = this.keys.activity(queue, step);
      if (p?.requests) multi.hincrby(key, activityField.requests, p.requests);
      if (p?.errors) multi.hincrby(key, activityField.errors, p.errors);
      if (p?.tokens) multi.hincrby(key, activityField.tokens, p.tokens);
      for (const [bucket, n] of p?.latency.counts ?? [])
        multi.hincrby(key, activityField.latency(bucket), n);
      const d = depths.get(queue);
      if (d) {
        multi.hincrby(key, activityField.depthSum, d.sum);
        multi.hincrby(key, activityField.depthSamples, d.n);
      }
      multi.expire(key, TTL_S);
      if (p?.slowest.entries.length) {
        const slow = this.keys.slowest(queue, minute);
        multi.zadd(slow, ...p.slowest.entries.flatMap((e) => [e.total_ms, JSON.stringify(e)]));
        multi.zremrangebyrank(slow, 0, -(SLOWEST_KEPT + 1));
        multi.expire(slow, TTL_S);
      }
      writes.push(multi.exec());
    }
    await Promise.all(writes);
  }

  private of(model: string, version: string): Pending {
    return perVersion(this.pending, model, version, () => ({
      queue: queueName(model, version),
      requests: 0,
      errors: 0,
      tokens: 0,
      latency: new LatencySketch(),
      slowest: new SlowestList(),
    }));
  }
}
