import type { ChainableCommander } from "ioredis";

/**
 * One model version's counters in the model's shared statistics hash (`Keys.stats`), as the
 * API replicas (requests, their outcomes and durations, cache lookups) and the workers
 * (executions by batch size, rows and their time in the queue) add to them, each once a
 * second. Durations are kept in whole microseconds (HINCRBY adds integers).
 */
export interface VersionCounters {
  /** Requests a model answered, and failed ones (cache hits are counted apart). */
  requests: number;
  errors: number;
  ok_us: number;
  fail_us: number;
  cache_hits: number;
  cache_hit_us: number;
  cache_misses: number;
  /** Rows a worker computed, and the time they waited for their batch. */
  rows: number;
  queue_us: number;
  /** Executions by batch size: how many, and their compute time. */
  batches: Record<number, { count: number; us: number }>;
  /** When a worker last ran the version (epoch ms; 0 never). */
  last_ms: number;
}

/** The hash's field for one of a version's counters. */
export const counterField = {
  requests: (version: string) => `${version}:requests`,
  errors: (version: string) => `${version}:errors`,
  okUs: (version: string) => `${version}:ok_us`,
  failUs: (version: string) => `${version}:fail_us`,
  cacheHits: (version: string) => `${version}:cache_hits`,
  cacheHitUs: (version: string) => `${version}:cache_hit_us`,
  cacheMisses: (version: string) => `${version}:cache_misses`,
  rows: (version: string) => `${version}:rows`,
  queueUs: (version: string) => `${version}:queue_us`,
  executions: (version: string, size: number) => `${version}:exec:${size}`,
  executionUs: (version: string, size: number) => `${version}:exec_us:${size}`,
  last: (version: string) => `${version}:last_ms`,
};

/** A version nothing has counted yet. */
export const emptyCounters = (): VersionCounters => ({
  requests: 0,
  errors: 0,
  ok_us: 0,
  fail_us: 0,
  cache_hits: 0,
  cache_hit_us: 0,
  cache_misses: 0,
  rows: 0,
  queue_us: 0,
  batches: {},
  last_ms: 0,
});

const SCALARS: Record<string, Exclude<keyof VersionCounters, "batches">> = {
  requests: "requests",
  errors: "errors",
  ok_us: "ok_us",
  fail_us: "fail_us",
  cache_hits: "cache_hits",
  cache_hit_us: "cache_hit_us",
  cache_misses: "cache_misses",
  rows: "rows",
  queue_us: "queue_us",
  last_ms: "last_ms",
};

/** Every version's counters in a model's statistics hash (its other fields left out). */
export function parseVersionCounters(raw: Record<string, string>): Record<string, VersionCounters> {
  const out: Record<string, VersionCounters> = {};
  const of = (version: string) => {
    const known = out[version];
    if (known) return known;
    const made = emptyCounters();
    out[version] = made;
    return made;
  };
  for (const [field, value] of Object.entries(raw)) {
    const [version = "", kind = "", size] = field.split(":");
    const n = Number(value);
    const scalar = SCALARS[kind];
    if (scalar && size === undefined) of(version)[scalar] = n;
    else if ((kind === "exec" || kind === "exec_us") && size !== undefined) {
      const batches = of(version).batches;
      const entry = batches[Number(size)] ?? { count: 0, us: 0 };
      batches[Number(size)] = entry;
      if (kind === "exec") entry.count = n;
      else entry.us = n;
    }
  }
  return out;
}

/** A version's request counts not yet added to the shared ones (durations in whole us). */
export interface RequestTally {
  requests: number;
  errors: number;
  okUs: number;
  failUs: number;
}

export const emptyTally = (): RequestTally => ({ requests: 0, errors: 0, okUs: 0, failUs: 0 });

/** Counts one request that took `ms`. */
export function tallyRequest(tally: RequestTally, ms: number, failed: boolean): void {
  tally.requests++;
  const us = Math.round(ms * 1000);
  if (failed) {
    tally.errors++;
    tally.failUs += us;
  } else tally.okUs += us;
}

/** Adds a version's request counts to the model's statistics hash `key`, in `pipeline`. */
export function addTally(
  pipeline: ChainableCommander,
  key: string,
  version: string,
  tally: RequestTally,
): void {
  if (tally.requests) pipeline.hincrby(key, counterField.requests(version), tally.requests);
  if (tally.errors) pipeline.hincrby(key, counterField.errors(version), tally.errors);
  if (tally.okUs) pipeline.hincrby(key, counterField.okUs(version), tally.okUs);
  if (tally.failUs) pipeline.hincrby(key, counterField.failUs(version), tally.failUs);
}

/** What `counts` holds for `version` of `model`, made by `make` the first time. */
export function perVersion<T>(
  counts: Map<string, Map<string, T>>,
  model: string,
  version: string,
  make: () => T,
): T {
  let byVersion = counts.get(model);
  if (!byVersion) {
    byVersion = new Map();
    counts.set(model, byVersion);
  }
  let entry = byVersion.get(version);
  if (!entry) {
    entry = make();
    byVersion.set(version, entry);
  }
  return entry;
}
