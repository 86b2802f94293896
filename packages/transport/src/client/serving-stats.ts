import type { ChainableCommander } from "ioredis";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
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

/** Upper bounds of the latency histogram kept per version, in ms. */
export const LATENCY_BUCKETS_MS = [
  1,
  2,
  5,
  10,
  20,
  50,
  100,
  200,
  500,
  1_000,
  2_000,
  5_000,
  10_000,
  Number.POSITIVE_INFINITY,
];

export interface VersionStats {
  requests: number;
  errors: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

export interface ModelStats {
  versions: Record<string, VersionStats>;
  cache: { hits: number; misses: number };
  fallbacks: Record<string, number>;
}

interface PendingStats extends RequestTally {
  buckets: number[];
  /** Cache lookups for the version: hits (answers, with their time) and misses. */
  cacheHits: number;
  cacheHitUs: number;
  cacheMisses: number;
}

const emptyPending = (): PendingStats => ({
  ...emptyTally(),
  buckets: LATENCY_BUCKETS_MS.map(() => 0),
  cacheHits: 0,
  cacheHitUs: 0,
  cacheMisses: 0,
});

/** How often a replica adds its counts to the shared ones, in ms. */
const FLUSH_MS = 1_000;

/**
 * Per-version request, error and latency counts, cache lookups and fallbacks every API replica
 * adds to Redis: counted locally, added once a second (no command per request).
 */
export class ServingStats {
  private readonly pending = new Map<string, Map<string, PendingStats>>();
  /** model -> field -> count, for cache hits and misses and fallbacks by source. */
  private readonly counters = new Map<string, Map<string, number>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), FLUSH_MS);
    this.timer.unref();
  }

  record(model: string, version: string, latencyMs: number, failed: boolean): void {
    const stats = perVersion(this.pending, model, version, emptyPending);
    tallyRequest(stats, latencyMs, failed);
    const bucket = LATENCY_BUCKETS_MS.findIndex((b) => latencyMs <= b);
    stats.buckets[bucket] = (stats.buckets[bucket] ?? 0) + 1;
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
    if (this.pending.size === 0 && this.counters.size === 0) return;
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
        s.buckets.forEach((n, k) => {
          if (n) pipeline.hincrby(key, `${version}:le:${k}`, n);
        });
      }
    }
    this.pending.clear();
    await Promise.all([...pipelines.values()].map((p) => p.exec()));
  }

  /** Shared counts: per version (quantiles at bucket resolution), cache and fallbacks. */
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
    const buckets = new Map<string, number[]>();
    for (const [field, value] of Object.entries(raw)) {
      const [version = "", kind = "", index] = field.split(":");
      if (version === "cache" || version === "fallback") continue;
      out[version] ??= { requests: 0, errors: 0, p50_ms: null, p95_ms: null };
      const stats = out[version];
      if (!stats) continue;
      if (kind === "requests") stats.requests = Number(value);
      else if (kind === "errors") stats.errors = Number(value);
      else if (kind === "le") {
        const list = buckets.get(version) ?? LATENCY_BUCKETS_MS.map(() => 0);
        list[Number(index)] = Number(value);
        buckets.set(version, list);
      }
    }
    for (const [version, list] of buckets) {
      const stats = out[version];
      if (!stats) continue;
      stats.p50_ms = quantileOf(list, 0.5);
      stats.p95_ms = quantileOf(list, 0.95);
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

function quantileOf(counts: number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let seen = 0;
  for (const [k, n] of counts.entries()) {
    seen += n;
    if (seen >= q * total) {
      const bound = LATENCY_BUCKETS_MS[k] ?? Number.POSITIVE_INFINITY;
      return Number.isFinite(bound) ? bound : (LATENCY_BUCKETS_MS.at(-2) ?? 0);
    }
  }
  return null;
}
