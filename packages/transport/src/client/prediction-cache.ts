import type { Redis } from "ioredis";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";

/**
 * Stores the entry, indexes it by time, and trims the index to `max` entries, deleting the
 * oldest: the cache bounds itself, since BullMQ requires Redis to run with `noeviction`.
 * (The trimmed keys are not declared in KEYS, which a Redis Cluster would refuse; Ferry's
 * keys of one deployment live on one Redis.)
 */
const PUT = `
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[2]) * 1000)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
  for _, key in ipairs(old) do redis.call('DEL', key) end
end
return over
`;

export interface CachedAnswer<T> {
  value: T;
  /** Epoch ms when it was stored. */
  at: number;
}

/**
 * The shared prediction cache: model, version and a hash of the input name one answer. An
 * entry is fresh for `ttl_s`; it is kept `keep_s` (longer) so that a failing model can still
 * answer with the last known result (`fallback_cache`).
 */
export class PredictionCache {
  /**
   * A small LRU of this replica's recent answers in front of Redis: an answer never changes
   * for a given model, version and input, so a local copy is as good as the shared one and
   * saves the round trip.
   */
  private readonly local = new Map<string, CachedAnswer<unknown>>();
  private readonly putScript: LuaCommand<unknown>;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    /** Entries this replica keeps in memory. @defaultValue 10_000 */
    private readonly localEntries = 10_000,
  ) {
    this.putScript = new LuaCommand(redis, "ferryCachePut", 2, PUT);
  }

  async get<T>(
    model: string,
    version: string,
    inputHash: string,
  ): Promise<CachedAnswer<T> | undefined> {
    const key = this.keys.cacheEntry(model, version, inputHash);
    const near = this.local.get(key);
    if (near) {
      this.remember(key, near);
      return near as CachedAnswer<T>;
    }
    const raw = await this.redis.get(key);
    if (raw === null) return undefined;
    const answer = JSON.parse(raw) as CachedAnswer<T>;
    this.remember(key, answer);
    return answer;
  }

  async put<T>(
    model: string,
    version: string,
    inputHash: string,
    value: T,
    keepS: number,
    maxEntries: number,
  ): Promise<void> {
    const now = Date.now();
    const entry: CachedAnswer<T> = { value, at: now };
    const key = this.keys.cacheEntry(model, version, inputHash);
    this.remember(key, entry);
    await this.putScript.run(
      this.redis,
      key,
      this.keys.cacheIndex(model),
      JSON.stringify(entry),
      keepS,
      now,
      maxEntries,
    );
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
