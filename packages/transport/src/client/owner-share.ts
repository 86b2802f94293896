import { FerryError } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { guarded } from "../shared/redis-guard.js";

/**
 * Counts an owner's jobs still waiting in a queue and, under `cap`, takes job `id` in among
 * them. A member no longer in BullMQ's waiting set (taken by a worker, cancelled, expired) is
 * dropped: the oldest `scan` at each call, every one when the count reaches the cap. Members
 * younger than `young` ms are never dropped: their job may not be queued yet.
 * KEYS: the owner's set, BullMQ's prioritized set (one slot: the queue's tag).
 * ARGV: id, now (ms), cap, ttl (s), scan, young (ms).
 * Returns -1 when taken in, else the owner's count of waiting jobs.
 */
const TAKE = `
local now, young = tonumber(ARGV[2]), tonumber(ARGV[6])
local function prune(n)
  local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - young, 'LIMIT', 0, n)
  for _, m in ipairs(members) do
    if not redis.call('ZSCORE', KEYS[2], m) then redis.call('ZREM', KEYS[1], m) end
  end
end
prune(tonumber(ARGV[5]))
local cap = tonumber(ARGV[3])
local count = redis.call('ZCARD', KEYS[1])
if count >= cap then
  prune(count)
  count = redis.call('ZCARD', KEYS[1])
  if count >= cap then return count end
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return -1
`;

/** Members looked at on each call, oldest first (a queue is taken from mostly in order). */
const SCAN = 64;
/** How long a member is kept whatever BullMQ says: its job's own add may not have landed. */
const YOUNG_MS = 2_000;

/**
 * Holds each tenant to a share of a model version's queue: one key's jobs waiting there may
 * fill at most `share` of its `max_queue_size`, so that one key cannot leave every other
 * key's requests to that model nothing but 429s (KEY_QUEUE_SHARE). Counted in Redis beside
 * BullMQ's own waiting set, across every API replica, with no worker taking part.
 */
export class OwnerShare {
  private readonly takeScript: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** How long an owner's set lives past its last job, in s (JOB_TTL_S). */
    private readonly ttlS: number,
  ) {
    this.takeScript = new LuaCommand(redis, "ferryTakeOwnerShare", 2, TAKE);
  }

  /** Counts job `id` among `owner`'s waiting in `queue`, or refuses it (QUEUE_FULL). */
  async take(
    queue: string,
    owner: string,
    id: string,
    maxQueueSize: number,
    share: number,
  ): Promise<void> {
    const cap = Math.max(1, Math.floor(maxQueueSize * share));
    const count = await guarded(() =>
      this.takeScript.run(
        this.redis,
        this.keys.ownerQueued(queue, owner),
        this.keys.bullPrioritized(queue),
        id,
        Date.now(),
        cap,
        this.ttlS,
        SCAN,
        YOUNG_MS,
      ),
    );
    if (count < 0) return;
    throw FerryError.refusal(
      "QUEUE_FULL",
      `This key has ${count} requests waiting for ${queue}, the most one key may have there (KEY_QUEUE_SHARE: ${cap} of its ${maxQueueSize})`,
      { retryAfterS: 1 },
    );
  }
}
