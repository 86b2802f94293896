import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { guarded } from "../shared/redis-guard.js";

/**
 * Takes a running seat for batch `id` of an owner, or renews it: first drops seats whose lease
 * lapsed (their runner died), then refuses when the owner holds `max` others. Leases are on
 * Redis's clock, not a replica's: one whose clock ran 30 s ahead saw every other replica's
 * seats as lapsed.
 * KEYS: the owner's running set. ARGV: id, lease (ms), max, key ttl (s).
 * Returns 1 when held, 0 when refused.
 */
const ENTER = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
`;

/**
 * The OpenAI-shaped batches each tenant is running, across every API replica, held to a
 * number per tenant: a tenant's many batches then take turns, and another tenant's batch gets
 * a runner rather than waiting behind all of them. A seat is a lease its runner renews; a
 * runner that dies holds its seat until the lease lapses.
 */
export class RunningBatches {
  private readonly enterScript: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.enterScript = new LuaCommand(redis, "ferryEnterRunningBatch", 1, ENTER);
  }

  /**
   * Takes (or renews) batch `id`'s seat among `owner`'s running batches for `leaseMs`; false
   * when `owner` already runs `max` others.
   */
  async enter(owner: string, id: string, max: number, leaseMs: number): Promise<boolean> {
    const held = await guarded(() =>
      this.enterScript.run(
        this.redis,
        this.keys.openAiBatchesRunning(owner),
        id,
        leaseMs,
        max,
        Math.ceil(leaseMs / 1000) + 1,
      ),
    );
    return held === 1;
  }

  /** Gives the seat up (its batch ended, or went back to the queue). */
  async leave(owner: string, id: string): Promise<void> {
    await guarded(() => this.redis.zrem(this.keys.openAiBatchesRunning(owner), id));
  }

  /** The batches `owner` runs now (seats whose lease has not lapsed, by Redis's clock). */
  async count(owner: string): Promise<number> {
    const [s, us] = await guarded(() => this.redis.time());
    const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    return guarded(() => this.redis.zcount(this.keys.openAiBatchesRunning(owner), now, "+inf"));
  }
}
