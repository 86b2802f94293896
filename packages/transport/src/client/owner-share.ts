import { bullPriority, DEFAULT_PRIORITY, FerryError, TURNS } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { guarded } from "../shared/redis-guard.js";
import { FIRST_WAITING_TURN } from "./first-waiting-turn.js";

/**
 * Counts an owner's jobs still waiting in a queue, its batch lines (the lowest band) apart
 * from the rest, and, under both caps, takes jobs `ids` in among its group, all of them or
 * none (a request's several choices: taken a choice at a time, two requests of one key that
 * fit its share one after the other collided halfway, and both were refused). A member is dropped
 * once its job is no longer waiting: its job's hash exists and it is not in BullMQ's
 * prioritized set (taken by a worker, finished), or it has no hash and is older than `young`
 * ms (cancelled, expired, or its add never landed; a younger one's add may still be on its
 * way). The oldest `scan` members of the job's group are looked at on each call, every member
 * of both when a cap is reached, at most once per `every` ms (a key at its cap is refused on
 * the count meanwhile, not looked through on each try).
 * Taken in, the first job gets its turn at its priority (`TURNS` in @ferry/protocol): the one
 * after the owner's last job at that priority while that one still waits (in BullMQ's
 * prioritized set, or not yet added: no hash, and in the group's set) or any other of the
 * group does, but never before the turn of the priority's first waiting job (0 with none),
 * which is the turn of an owner with none waiting; each job after it, the turn after the one
 * before.
 * KEYS: the owner's set of the job's group, BullMQ's prioritized set, the owner's last full
 * look, the owner's set of the other group, the owner's last turns (one slot: the queue's
 * tag). ARGV: the number of jobs, the group's cap, ttl (s), scan, young (ms), every (ms),
 * BullMQ's key prefix of the queue's jobs, the cap of both groups together, the priority's
 * first BullMQ priority, the turns a priority has, the priority, then the jobs' ids.
 * Returns {1, the first job's turn} when taken in, else {0, the group's count, both groups'
 * count}.
 */
const TAKE = `${FIRST_WAITING_TURN}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local young, jobs = tonumber(ARGV[5]), ARGV[7]
local function prune(set, n)
  local members = redis.call('ZRANGE', set, 0, n - 1, 'WITHSCORES')
  for k = 1, #members, 2 do
    local m, at = members[k], tonumber(members[k + 1])
    if not redis.call('ZSCORE', KEYS[2], m) then
      if redis.call('EXISTS', jobs .. m) == 1 or at < now - young then
        redis.call('ZREM', set, m)
      end
    end
  end
end
prune(KEYS[1], tonumber(ARGV[4]))
local n = tonumber(ARGV[1])
local cap, total = tonumber(ARGV[2]), tonumber(ARGV[8])
local count = redis.call('ZCARD', KEYS[1])
local other = redis.call('ZCARD', KEYS[4])
if (count + n > cap or count + other + n > total) and redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[6]) then
  prune(KEYS[1], count)
  prune(KEYS[4], other)
  count = redis.call('ZCARD', KEYS[1])
  other = redis.call('ZCARD', KEYS[4])
end
if count + n > cap or count + other + n > total then return {0, count, count + other} end
local turns = tonumber(ARGV[10])
local head = firstWaitingTurn(KEYS[2], tonumber(ARGV[9]), turns)
local last = redis.call('HMGET', KEYS[5], ARGV[11] .. ':id', ARGV[11] .. ':turn')
local turn = head
if last[1] and last[2] then
  local waits = redis.call('ZSCORE', KEYS[2], last[1])
    or (redis.call('EXISTS', jobs .. last[1]) == 0 and redis.call('ZSCORE', KEYS[1], last[1]))
  -- its last one gone (taken, cancelled) while others of its wait: after it all the same,
  -- never ahead of its own earlier ones
  if waits or count > 0 then turn = math.max(tonumber(last[2]) + 1, head) end
end
if turn > turns - 1 then turn = turns - 1 end
local first = turn
for k = 1, n do
  redis.call('ZADD', KEYS[1], now, ARGV[11 + k])
  if k < n and turn < turns - 1 then turn = turn + 1 end
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[5], ARGV[11] .. ':id', ARGV[11 + n], ARGV[11] .. ':turn', turn)
redis.call('EXPIRE', KEYS[5], ARGV[3])
return {1, first}
`;

/** Members looked at on each call, oldest first (a queue is taken from mostly in order). */
const SCAN = 64;
/** How long a member whose job is not in Redis yet is kept: its add may be on its way. */
const YOUNG_MS = 2_000;
/** How often a key at its cap has all its members looked through, at most, in ms. */
const FULL_LOOK_MS = 250;

/** What one job of an owner is held to in its queue. */
export interface HeldTo {
  /** The model version's `max_queue_size`. */
  maxQueueSize: number;
  /** The share of it one owner's waiting jobs may fill (KEY_QUEUE_SHARE). */
  share: number;
  /** Set for a job of the lowest priority band: the share of the owner's it may fill (BATCH_QUEUE_SHARE). */
  lowestShare?: number | undefined;
  /** The job's priority, for its turn. @defaultValue DEFAULT_PRIORITY */
  priority?: number | undefined;
}

/**
 * Holds each tenant to a share of a model version's queue: one key's jobs waiting there may
 * fill at most `share` of its `max_queue_size` (its lowest-priority jobs, batch lines, only
 * `lowestShare` of that, so that its own interactive requests keep room), so that one key
 * cannot leave every other key's requests to that model nothing but 429s (KEY_QUEUE_SHARE).
 * Counted in Redis beside BullMQ's own waiting set, across every API replica, with no worker
 * taking part.
 */
export class OwnerShare {
  private readonly takeScript: LuaCommand<[number, number, number?]>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** How long an owner's set lives past its last job, in s (JOB_TTL_S). */
    private readonly ttlS: number,
  ) {
    this.takeScript = new LuaCommand(redis, "ferryTakeOwnerShare4", 5, TAKE);
  }

  /**
   * Counts job `id` among `owner`'s waiting in `queue`, or refuses it (QUEUE_FULL). `lowest`:
   * a job of the lowest priority band, held to `lowestShare` of the owner's share. Returns its
   * turn at its `priority` (the script's rule above).
   */
  async take(queue: string, owner: string, id: string, held: HeldTo): Promise<number> {
    return (await this.takeAll(queue, owner, [id], held))[0] as number;
  }

  /**
   * As `take`, for jobs `ids` together: all are counted, or none and QUEUE_FULL. Returns
   * their turns, one after another.
   */
  async takeAll(
    queue: string,
    owner: string,
    ids: readonly string[],
    held: HeldTo,
  ): Promise<number[]> {
    const { maxQueueSize, share, lowestShare, priority = DEFAULT_PRIORITY } = held;
    const lowest = lowestShare !== undefined;
    const ownerCap = Math.max(1, Math.floor(maxQueueSize * share));
    const cap = lowest ? Math.max(1, Math.floor(ownerCap * lowestShare)) : ownerCap;
    // more than the key may ever have waiting: a 429 would ask for a retry that cannot help
    if (ids.length > cap)
      throw new FerryError(
        "INVALID_INPUT",
        `This request's ${ids.length} choices are more than one key may have waiting for ${queue} (${cap}: KEY_QUEUE_SHARE of the queue's ${maxQueueSize}${cap < ownerCap ? ", BATCH_QUEUE_SHARE of that for priority 1-3" : ""}); ask for fewer`,
      );
    const rest = this.keys.ownerQueued(queue, owner);
    const batchLines = this.keys.ownerQueuedLowest(queue, owner);
    const [taken, turnOrCount, total] = await guarded(() =>
      this.takeScript.run(
        this.redis,
        lowest ? batchLines : rest,
        this.keys.bullPrioritized(queue),
        `${rest}:looked`,
        lowest ? rest : batchLines,
        this.keys.ownerTurns(queue, owner),
        ids.length,
        cap,
        this.ttlS,
        SCAN,
        YOUNG_MS,
        FULL_LOOK_MS,
        this.keys.bullJobPrefix(queue),
        ownerCap,
        bullPriority(priority, 0),
        TURNS,
        priority,
        ...ids,
      ),
    );
    if (taken === 1) return ids.map((_, k) => Math.min(turnOrCount + k, TURNS - 1));
    throw FerryError.refusal(
      "QUEUE_FULL",
      refusal({
        queue,
        n: ids.length,
        maxQueueSize,
        // the group's cap refused it only where the group alone is past it: else both together
        byGroup: lowest && cap < ownerCap && turnOrCount + ids.length > cap,
        group: { count: turnOrCount, cap },
        both: { count: total ?? turnOrCount, cap: ownerCap },
      }),
      { retryAfterS: 1 },
    );
  }

  /**
   * Gives back the places `takeAll` took for jobs `ids` that were not queued after all (the
   * queue's depth refused them after the share took them in).
   */
  async release(queue: string, owner: string, ids: readonly string[], lowest: boolean) {
    if (ids.length === 0) return;
    const group = lowest
      ? this.keys.ownerQueuedLowest(queue, owner)
      : this.keys.ownerQueued(queue, owner);
    await guarded(() => this.redis.zrem(group, ...ids));
  }
}

/** Why a key's jobs were refused: the cap that refused them (its batch lines', or its own). */
function refusal(why: {
  queue: string;
  n: number;
  maxQueueSize: number;
  byGroup: boolean;
  group: { count: number; cap: number };
  both: { count: number; cap: number };
}): string {
  const { queue, n, maxQueueSize, byGroup, group, both } = why;
  if (byGroup)
    return n > 1
      ? `This request's ${n} choices need ${n} places among the ${group.cap} one key may have waiting for ${queue} at priority 1-3, and this key has ${group.count} taken (BATCH_QUEUE_SHARE of its KEY_QUEUE_SHARE of the queue's ${maxQueueSize})`
      : `This key has ${group.count} requests waiting for ${queue} at priority 1-3 (batch lines among them); one key may have ${group.cap} there, the rest of its ${both.cap} kept for its priority 4 and up (KEY_QUEUE_SHARE of the queue's ${maxQueueSize}, BATCH_QUEUE_SHARE of that)`;
  return n > 1
    ? `This request's ${n} choices need ${n} places among those one key may have waiting for ${queue}, and this key has ${both.count} of its ${both.cap} taken (KEY_QUEUE_SHARE of the queue's ${maxQueueSize})`
    : `This key has ${both.count} requests waiting for ${queue}, the most one key may have there (KEY_QUEUE_SHARE: ${both.cap} of its ${maxQueueSize})`;
}
