import { queueName } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";

/**
 * Stores a turn's answers in one bucket, up to the bucket's share of the cache's size, and
 * lets the bucket expire a span after it closes: the cache bounds itself, since BullMQ needs
 * Redis to run with `noeviction`. KEYS: bucket. ARGV: max entries, expire-at (ms), field,
 * value, field, value...
 */
const PUT = `
local room = tonumber(ARGV[1]) - redis.call('HLEN', KEYS[1])
if room <= 0 then return 0 end
local n = math.min(room, (#ARGV - 2) / 2)
local args = {}
for i = 3, 2 + n * 2 do args[#args + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(args))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return n
`;

export interface CachedAnswer<T> {
  value: T;
  /** Epoch ms when it was stored. */
  at: number;
}

/** A stored answer as Redis holds it: `<stored at, epoch ms>:<JSON>`, so a script can judge its age. */
function encodeCached(value: unknown, at: number): string {
  return `${at}:${JSON.stringify(value)}`;
}

function decodeCached<T>(raw: string): CachedAnswer<T> | undefined {
  const colon = raw.indexOf(":");
  const at = Number(raw.slice(0, colon));
  if (colon < 0 || !Number.isFinite(at)) return undefined;
  try {
    return { at, value: JSON.parse(raw.slice(colon + 1)) as T };
  } catch {
    return undefined;
  }
}

/** Which answers to keep, and for how long. */
export interface CacheScope {
  model: string;
  version: string;
  /** How long an answer is kept (its freshness, `ttl_s`, is the caller's to judge), in s. */
  keepS: number;
}

interface Lookup {
  field: string;
  resolve: (raw: string | undefined) => void;
}

interface Write {
  maxEntries: number;
  expireAt: number;
  fields: string[];
}

/**
 * The shared prediction cache: model, version and a hash of the input name one answer. An
 * entry is fresh for `ttl_s`; it is kept `keep_s` (longer) so that a failing model can still
 * answer with the last known result (`fallback_cache`).
 *
 * Answers live in hashes, one per model version and span of `keep_s` (a bucket): a turn's
 * lookups are one HMGET of the current bucket and one of the previous, and a turn's answers
 * one script call, however many requests the turn carried. An answer is kept at least
 * `keep_s` and at most twice that; each bucket holds up to half of `max_entries`.
 */
export class PredictionCache {
  /**
   * A small LRU of this replica's recent answers in front of Redis: an answer never changes
   * for a given model, version and input, so a local copy is as good as the shared one and
   * saves the round trip.
   */
  private readonly local = new Map<string, CachedAnswer<unknown>>();
  private readonly putScript: LuaCommand<number>;
  /** This turn's lookups and writes, by bucket key. */
  private readonly lookups = new Map<string, Lookup[]>();
  private readonly writes = new Map<string, Write>();
  private scheduled = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** Entries this replica keeps in memory. @defaultValue 10_000 */
    private readonly localEntries = 10_000,
  ) {
    this.putScript = new LuaCommand(redis, "ferryCachePut", 1, PUT);
  }

  async get<T>(scope: CacheScope, inputHash: string): Promise<CachedAnswer<T> | undefined> {
    const near = this.peek<T>(scope, inputHash);
    if (near) return near;
    const [current, previous] = this.buckets(scope, Date.now());
    const [a, b] = await Promise.all([
      this.lookup(current, inputHash),
      this.lookup(previous, inputHash),
    ]);
    const raw = a ?? b;
    return raw === undefined ? undefined : this.found<T>(scope, inputHash, raw);
  }

  /** This replica's own copy of an answer, if it has one: no round trip. */
  peek<T>(scope: CacheScope, inputHash: string): CachedAnswer<T> | undefined {
    const localKey = localKeyOf(scope, inputHash);
    const near = this.local.get(localKey);
    if (near) this.remember(localKey, near);
    return near as CachedAnswer<T> | undefined;
  }

  /** An answer read from Redis (by `get`, or by the sync lane's lookup-or-enqueue script). */
  found<T>(scope: CacheScope, inputHash: string, raw: string): CachedAnswer<T> | undefined {
    const answer = decodeCached<T>(raw);
    if (!answer || Date.now() - answer.at > scope.keepS * 1000) return undefined;
    this.remember(localKeyOf(scope, inputHash), answer);
    return answer;
  }

  /** The buckets a lookup at `now` reads: the current span's, then the previous one's. */
  buckets(scope: CacheScope, now: number): [current: string, previous: string] {
    const bucket = this.bucketOf(scope, now);
    return [this.bucketKey(scope, bucket), this.bucketKey(scope, bucket - 1)];
  }

  /** Stores an answer (with this turn's others, in one call). */
  put<T>(scope: CacheScope, inputHash: string, value: T, maxEntries: number): void {
    const now = Date.now();
    const entry: CachedAnswer<T> = { value, at: now };
    this.remember(localKeyOf(scope, inputHash), entry);
    const bucket = this.bucketOf(scope, now);
    const key = this.bucketKey(scope, bucket);
    let write = this.writes.get(key);
    if (!write) {
      const spanMs = scope.keepS * 1000;
      write = {
        maxEntries: Math.max(1, Math.ceil(maxEntries / 2)),
        expireAt: (bucket + 2) * spanMs,
        fields: [],
      };
      this.writes.set(key, write);
    }
    write.fields.push(inputHash, encodeCached(value, now));
    this.schedule();
  }

  private bucketKey(scope: CacheScope, bucket: number): string {
    return this.keys.cacheBucket(queueName(scope.model, scope.version), bucket);
  }

  private bucketOf(scope: CacheScope, now: number): number {
    return Math.floor(now / (Math.max(1, scope.keepS) * 1000));
  }

  private lookup(key: string, field: string): Promise<string | undefined> {
    return new Promise((resolve) => {
      let list = this.lookups.get(key);
      if (!list) {
        list = [];
        this.lookups.set(key, list);
      }
      list.push({ field, resolve });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    for (const [key, list] of this.lookups) {
      this.redis.hmget(key, ...list.map((l) => l.field)).then(
        (values) => {
          for (const [k, l] of list.entries()) l.resolve(values[k] ?? undefined);
        },
        () => {
          // an unreachable cache is a miss: the model answers
          for (const l of list) l.resolve(undefined);
        },
      );
    }
    this.lookups.clear();
    for (const [key, write] of this.writes)
      void this.putScript
        .run(this.redis, key, write.maxEntries, write.expireAt, ...write.fields)
        .catch(() => undefined);
    this.writes.clear();
  }

  /** Most recently used last; the oldest entry leaves when the map is full. */
  private remember(key: string, answer: CachedAnswer<unknown>): void {
    this.local.delete(key);
    this.local.set(key, answer);
    if (this.local.size > this.localEntries) {
      const oldest = this.local.keys().next().value;
      if (oldest !== undefined) this.local.delete(oldest);
    }
  }
}

/** An answer's name in this replica's own copy of the cache. */
function localKeyOf(scope: CacheScope, inputHash: string): string {
  return `${scope.model}\u0000${scope.version}\u0000${inputHash}`;
}
