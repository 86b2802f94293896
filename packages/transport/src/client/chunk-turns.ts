import { bullPriority, TURNS } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { FIRST_WAITING_TURN } from "./first-waiting-turn.js";

/** Chunks' priority, the lowest: chunks run after every interactive request. */
export const CHUNK_PRIORITY = 1;
/**
 * How long an owner's last chunk with no job hash counts as on its way (its add may not have
 * landed yet) rather than run and removed, in ms.
 */
const YOUNG_MS = 2_000;

/**
 * Lua: the turn of an owner's next chunk at its priority in a queue (start-time fair queuing, as
 * `OwnerShare` gives jobs theirs): the one after the owner's last chunk while that one still
 * waits (in BullMQ's prioritized set, or not added yet: no job hash and younger than `young`),
 * never before the priority's first waiting turn, which is the turn of an owner with none waiting.
 * KEYS: BullMQ's prioritized set, the owner's turns (`OwnerShare`'s hash: one priority's turn is
 * one turn, whichever of the owner's jobs or chunks took it). ARGV: the chunk's job id, ttl
 * (s), BullMQ's key prefix of the queue's jobs, the priority's first BullMQ priority, the turns a
 * priority has, its field prefix, young (ms). Returns the turn.
 */
const TURN = `${FIRST_WAITING_TURN}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local turns = tonumber(ARGV[5])
local head = firstWaitingTurn(KEYS[1], tonumber(ARGV[4]), turns)
local p = ARGV[6]
local last = redis.call('HMGET', KEYS[2], p .. ':id', p .. ':turn', p .. ':at')
local turn = head
if last[1] and last[2] then
  local waits = redis.call('ZSCORE', KEYS[1], last[1])
    or (redis.call('EXISTS', ARGV[3] .. last[1]) == 0 and tonumber(last[3] or '0') > now - tonumber(ARGV[7]))
  if waits then turn = math.max(tonumber(last[2]) + 1, head) end
end
if turn > turns - 1 then turn = turns - 1 end
redis.call('HSET', KEYS[2], p .. ':id', ARGV[1], p .. ':turn', turn, p .. ':at', now)
redis.call('EXPIRE', KEYS[2], ARGV[2])
return turn
`;

/**
 * Turns of offline chunks between owners: each key's next chunk takes the turn after its last
 * one still waiting, so that every key's first waiting chunk runs before anyone's second,
 * however many batches each has (a key's five one-chunk batches no longer all go before
 * another key's one), and one key's chunks stay in their order.
 */
export class ChunkTurns {
  private readonly script: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {
    this.script = new LuaCommand(redis, "ferryChunkTurn", 2, TURN);
  }

  /** The BullMQ priority of `owner`'s chunk (job `jobId`) queued now on `queue`. */
  async priority(queue: string, owner: string, jobId: string): Promise<number> {
    const turn = await this.script.run(
      this.redis,
      this.keys.bullPrioritized(queue),
      this.keys.ownerTurns(queue, owner),
      jobId,
      this.ttlS,
      this.keys.bullJobPrefix(queue),
      bullPriority(CHUNK_PRIORITY, 0),
      TURNS,
      CHUNK_PRIORITY,
      YOUNG_MS,
    );
    return bullPriority(CHUNK_PRIORITY, Number(turn));
  }
}
