import { randomUUID } from "node:crypto";
import type { JobEvent, JobEventBody } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";
import type { JobRef, Keys } from "./keys.js";
import { LuaCommand } from "./lua-command.js";

/**
 * Appends events to a job's stream and publishes each with the id the stream gave it (on the
 * stream's own shard channel: same name, same slot, so on a cluster only its shard carries it), in one
 * atomic step: a reader that subscribes first and then replays the stream sees every event,
 * and can drop the duplicates by id. A worker's writes are fenced by its BullMQ lock: once
 * the lock is gone (the job stalled and went to another worker), its late writes are dropped.
 * Each call carries an id of its own, kept beside the log in the same step: a call Redis
 * applied but whose reply was lost (its primary died after replicating it) is sent again by
 * the client on the promoted replica, and is then a no-op instead of a second copy of events.
 * KEYS: stream, lock (the stream again when unfenced), last applied call id. ARGV: channel,
 * maxlen, ttl, token, call id, events.
 */
const APPEND = `
if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[4] then return -1 end
if redis.call('GET', KEYS[3]) == ARGV[5] then return #ARGV - 5 end
for i = 6, #ARGV do
  local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[i])
  redis.call('SPUBLISH', ARGV[1], id .. ' ' .. ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[3], ARGV[5], 'EX', ARGV[3])
return #ARGV - 5
`;

/** Events a job's log keeps at most; plenty for the longest completion a model allows. */
const MAX_EVENTS = 10_000;

/** Whose writes these are: the job's BullMQ lock key and the token the writer holds it with. */
export interface WriteFence {
  lockKey: string;
  token: string;
}

/** The lock a worker holds `job` with, which its event writes must still hold to land. */
export function fenceOf(
  keys: Keys,
  job: { queueName: string; id?: string | undefined },
  token: string | undefined,
): WriteFence | undefined {
  return token ? { lockKey: `${keys.prefix}:${job.queueName}:${job.id}:lock`, token } : undefined;
}

interface Pending {
  job: JobRef;
  key: string;
  events: JobEventBody[];
  fence: WriteFence | undefined;
}

/**
 * The writing side of job event logs. Events of one event-loop turn go out together: one
 * script call per job, on a connection that pipelines what one turn sends (per node, on a
 * cluster, where one pipeline may not span slots).
 */
export class EventWriter {
  private readonly buffered = new Map<string, Pending>();
  private scheduled = false;

  private fenceLost: (fence: WriteFence) => void = () => {};
  /** Names this writer's calls: `<writer>.<n>`, unique across processes and restarts. */
  private readonly writerId = randomUUID();
  private calls = 0;
  private readonly append: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {
    this.append = new LuaCommand(redis, "ferryAppendEvents", 3, APPEND);
  }

  /**
   * `listener` is called with a fence whose write was refused: the job's lock belongs to
   * another worker now, so whatever this one still computes for it is wasted.
   */
  onFenceLost(listener: (fence: WriteFence) => void): void {
    this.fenceLost = listener;
  }

  /** Queues events for a job; they are written together at the end of this turn. */
  emit(job: JobRef, events: JobEventBody[], fence?: WriteFence): void {
    const key = this.keys.events(job);
    const pending = this.buffered.get(key);
    if (pending) pending.events.push(...events);
    else this.buffered.set(key, { job, key, events: [...events], fence });
    if (!this.scheduled) {
      this.scheduled = true;
      // a failed write surfaces at the next explicit flush; a timer has nobody to tell
      setImmediate(() => void this.flush().catch(() => undefined));
    }
  }

  /** Writes everything queued; resolves once Redis has it. */
  async flush(): Promise<void> {
    this.scheduled = false;
    if (this.buffered.size === 0) return;
    const pending = [...this.buffered.values()];
    this.buffered.clear();
    await Promise.all(
      pending.map(async ({ job, key, events, fence }) => {
        const written = await this.append.run(
          this.redis,
          key,
          fence?.lockKey ?? key,
          this.keys.eventsApplied(job),
          key,
          String(MAX_EVENTS),
          String(this.ttlS),
          fence?.token ?? "",
          `${this.writerId}.${this.calls++}`,
          ...events.map((e) => JSON.stringify(e)),
        );
        if (written === -1 && fence) this.fenceLost(fence);
      }),
    );
  }

  /** Every event a job's log holds so far, oldest first. */
  async history(job: JobRef): Promise<JobEventBody[]> {
    const entries = await this.redis.xrange(this.keys.events(job), "-", "+");
    return entries.map((entry) => parseEntry(entry).body);
  }
}

/** An entry of a job's stream, as XRANGE returns it: [id, ["e", json]]. */
export function parseEntry([id, fields]: [string, string[]]): JobEvent {
  return { id, body: JSON.parse(fields[1] ?? "{}") as JobEventBody };
}

/** Parses what the append script published: "<id> <json>". */
export function parsePublished(message: string): JobEvent | undefined {
  const space = message.indexOf(" ");
  if (space < 0) return undefined;
  try {
    return {
      id: message.slice(0, space),
      body: JSON.parse(message.slice(space + 1)) as JobEventBody,
    };
  } catch {
    return undefined;
  }
}

/** Stream ids compare as (ms, seq) pairs. */
export function streamIdAfter(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am > bm || (am === bm && as > bs);
}
