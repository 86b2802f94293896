import type { JobEventBody, WireError } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";
import { MAX_EVENTS } from "./event-log.js";
import type { JobRef, Keys } from "./keys.js";
import { LuaCommand } from "./lua-command.js";
import { retrying, transient } from "./retrying.js";

/**
 * Appends the error and the `done` of a job's log, published as the event writer publishes,
 * unless the log already ends with a `done`: so any number of closers (the API that removed
 * the job, then any replica's sweep) may close it, and it gets one end. Returns 1 when it
 * wrote, 0 when the log was closed already.
 * KEYS: stream. ARGV: channel, maxlen, ttl, events.
 */
const CLOSE = `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if last and cjson.decode(last[2][2]).type == 'done' then return 0 end
for i = 4, #ARGV do
  local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[i])
  redis.call('SPUBLISH', ARGV[1], id .. ' ' .. ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`;

/**
 * Ends the event logs of jobs no worker will ever write to again: those the API removed from
 * their queue (cancelled or expired while queued). Readers follow a log until its `done`, so
 * a removed job's log must get one even if Redis fails the first tries.
 */
export class LogCloser {
  private readonly close: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
    /** How long a close that Redis failed is sent again (ms). */
    private readonly retryForMs: number,
  ) {
    this.close = new LuaCommand(redis, "ferryCloseEventLog", 1, CLOSE);
  }

  /**
   * Ends `job`'s log with `error`, kept `keepS` from then; true when this call wrote the end,
   * false when it had one.
   */
  async end(job: JobRef, error: WireError, keepS = this.ttlS): Promise<boolean> {
    const key = this.keys.events(job);
    const end: JobEventBody[] = [{ type: "error", error }, { type: "done" }];
    const events = end.map((e) => JSON.stringify(e));
    const wrote = await retrying(
      () => this.close.run(this.redis, key, key, String(MAX_EVENTS), String(keepS), ...events),
      this.retryForMs,
      transient,
    );
    return wrote === 1;
  }
}
