import type { ChainableCommander } from "ioredis";
import { ACTIVITY_STEP_MS, ActivityRecorder } from "../shared/activity-recorder.js";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { bucketOf, LatencySketch, roundQuantile } from "../shared/latency-sketch.js";
import type { RequestParts } from "../shared/slowest-requests.js";
import {
  addTally,
  counterField,
  emptyTally,
  parseVersionCounters,
  perVersion,
  type RequestTally,
  tallyRequest,
  type VersionCounters,
} from "../shared/version-counters.js";

/** A version's requests since counting began, and true quantiles of their latency (to 2%). */
export interface VersionStats {
  requests: number;
  errors: number;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
}

export interface ModelStats {
  versions: Record<string, VersionStats>;
  cache: { hits: number; misses: number };
  fallbacks: Record<string, number>;
}

interface PendingStats extends RequestTally {
  latency: LatencySketch;
  /** Cache lookups for the version: hits (answers, with their time) and misses. */
  cacheHits: number;
  cacheHitUs: number;
  cacheMisses: number;
}

const emptyPending = (): PendingStats => ({
  ...emptyTally(),
  latency: new LatencySketch(),
  cacheHits: 0,
  cacheHitUs: 0,
  cacheMisses: 0,
});

/** How often a replica adds its counts to the shared ones, in ms. */
const FLUSH_MS = 1_000;

/** Where the queues' depths are sampled from, once per step of the activity series. */
export interface DepthSource {
  /** Queues this process has admitted work to. */
  queues(): string[];
  waitingNow(queue: string): Promise<number>;
}

/**
 * Per-version request, error and latency counts, cache lookups and fallbacks every API replica
 * adds to Redis: counted locally, added once a second (no command per request).
 */
export class ServingStats {
  private readonly pending = new Map<string, Map<string, PendingStats>>();
  /** model -> field -> count, for cache hits and misses and fallbacks by source. */
  private readonly counters = new Map<string, Map<string, number>>();
  private timer: NodeJS.Timeout | undefined;
  /** The dashboard's recent activity: requests, latency, slowest, queue depth. */
  private readonly activity: ActivityRecorder;
  private depthSampledStep = -1;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly depths?: DepthSource,
  ) {
    this.activity = new ActivityRecorder(redis, keys);
  }

  start(): void {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), FLUSH_MS);
    this.timer.unref();
  }

  /**
   * One request answered by `version` of `model` after `latencyMs`. Named by its `request`, it
   * may join the version's slowest recent requests, with its timing's parts (read only then).
   */
  record(
    model: string,
    version: string,
    latencyMs: number,
    failed: boolean,
    request?: { requestId: string; timing?: RequestParts | undefined },
  ): void {
    const stats = perVersion(this.pending, model, version, emptyPending);
    tallyRequest(stats, latencyMs, failed);
    const bucket = bucketOf(latencyMs);
    stats.latency.addBucket(bucket, 1);
    this.activity.request(
      model,
      version,
      latencyMs,
      bucket,
      failed,
      request?.requestId,
      request?.timing,
    );
  }

  /**
   * A cache lookup for `version` of `model`; a hit is an answer, `latencyMs` its request's
   * duration.
   */
  recordCache(model: string, version: string, hit: boolean, latencyMs = 0): void {
    this.count(model, hit ? "cache:hits" : "cache:misses");
    // counted per version as numbers: the fields are named at the flush, not per request
    const stats = perVersion(this.pending, model, version, emptyPending);
    if (!hit) stats.cacheMisses++;
    else {
      stats.cacheHits++;
      stats.cacheHitUs += Math.round(latencyMs * 1000);
    }
  }

  recordFallback(model: string, source: string): void {
    this.count(model, `fallback:${source}`);
  }

  private count(model: string, field: string): void {
    let fields = this.counters.get(model);
    if (!fields) {
      fields = new Map();
      this.counters.set(model, fields);
    }
    fields.set(field, (fields.get(field) ?? 0) + 1);
  }

  /** Adds this replica's counts to the shared ones. */
  async flush(): Promise<void> {
    await this.sampleDepths();
    const activity = this.activity.flush();
    if (this.pending.size === 0 && this.counters.size === 0) return activity;
    // one pipeline per model: a model's stats are one key, and on a cluster a pipeline must
    // stay within one slot
    const pipelines = new Map<string, ChainableCommander>();
    const pipelineOf = (model: string) => {
      let pipeline = pipelines.get(model);
      if (!pipeline) {
        pipeline = this.redis.pipeline();
        pipelines.set(model, pipeline);
      }
      return pipeline;
    };
    for (const [model, fields] of this.counters) {
      for (const [field, n] of fields) pipelineOf(model).hincrby(this.keys.stats(model), field, n);
    }
    this.counters.clear();
    for (const [model, byVersion] of this.pending) {
      const key = this.keys.stats(model);
      const pipeline = pipelineOf(model);
      for (const [version, s] of byVersion) {
        addTally(pipeline, key, version, s);
        if (s.cacheHits) pipeline.hincrby(key, counterField.cacheHits(version), s.cacheHits);
        if (s.cacheHitUs) pipeline.hincrby(key, counterField.cacheHitUs(version), s.cacheHitUs);
        if (s.cacheMisses) pipeline.hincrby(key, counterField.cacheMisses(version), s.cacheMisses);
        for (const [bucket, n] of s.latency.counts)
          pipeline.hincrby(key, `${version}:lat:${bucket}`, n);
      }
    }
    this.pending.clear();
    await Promise.all([...[...pipelines.values()].map((p) => p.exec()), activity]);
  }

  /** Each queue's waiting work, once per step of the activity series. */
  private async sampleDepths(): Promise<void> {
    const step = Math.floor(Date.now() / ACTIVITY_STEP_MS);
    if (!this.depths || step === this.depthSampledStep) return;
    this.depthSampledStep = step;
    const depths = this.depths;
    await Promise.all(
      depths.queues().map((queue) =>
        depths.waitingNow(queue).then(
          (n) => this.activity.depth(queue, n),
          () => undefined,
        ),
      ),
    );
  }

  /** Shared counts: per version (true quantiles, to 2%), cache and fallbacks. */
  async stats(model: string): Promise<ModelStats> {
    const raw = await this.redis.hgetall(this.keys.stats(model));
    const out: Record<string, VersionStats> = {};
    const cache = {
      hits: Number(raw["cache:hits"] ?? 0),
      misses: Number(raw["cache:misses"] ?? 0),
    };
    const fallbacks: Record<string, number> = {};
    for (const [field, value] of Object.entries(raw)) {
      if (field.startsWith("fallback:")) fallbacks[field.slice("fallback:".length)] = Number(value);
    }
    const sketches = new Map<string, LatencySketch>();
    for (const [field, value] of Object.entries(raw)) {
      const [version = "", kind = "", bucket] = field.split(":");
      if (version === "cache" || version === "fallback") continue;
      out[version] ??= { requests: 0, errors: 0, p50_ms: null, p95_ms: null, p99_ms: null };
      const stats = out[version];
      if (!stats) continue;
      if (kind === "requests") stats.requests = Number(value);
      else if (kind === "errors") stats.errors = Number(value);
      else if (kind === "lat") {
        const sketch = sketches.get(version) ?? new LatencySketch();
        sketch.addBucket(Number(bucket), Number(value));
        sketches.set(version, sketch);
      }
    }
    for (const [version, sketch] of sketches) {
      const stats = out[version];
      if (!stats) continue;
      stats.p50_ms = roundQuantile(sketch.quantile(0.5));
      stats.p95_ms = roundQuantile(sketch.quantile(0.95));
      stats.p99_ms = roundQuantile(sketch.quantile(0.99));
    }
    return { versions: out, cache, fallbacks };
  }

  /**
   * Every version's counters, the API replicas' and the workers' (each adds its own once a
   * second: this replica's are added first).
   */
  async versionCounters(model: string): Promise<Record<string, VersionCounters>> {
    await this.flush().catch(() => undefined);
    return parseVersionCounters(await this.redis.hgetall(this.keys.stats(model)));
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
