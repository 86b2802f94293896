import { randomUUID } from "node:crypto";
import type { JobEvent, JobEventBody } from "@ferry/protocol";
import { inOneWrite, type RedisClient } from "./connection.js";
import type { JobRef, Keys } from "./keys.js";
import { LuaCommand } from "./lua-command.js";
import { retrying, transient } from "./retrying.js";

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
export const MAX_EVENTS = 10_000;

/**
 * Whose writes these are: the job's BullMQ lock key and the token the writer holds it with,
 * and which attempt of the job (BullMQ hands a worker's next job the token of its last, so a
 * job that comes back to the same worker can come back under the same token).
 */
export interface WriteFence {
  lockKey: string;
  token: string;
  attempt: string;
}

/** The lock a worker's attempt holds `job` with, which its event writes must still hold to land. */
export function fenceOf(
  keys: Keys,
  job: { queueName: string; id?: string | undefined },
  token: string | undefined,
): WriteFence | undefined {
  if (!token) return undefined;
  return {
    lockKey: `${keys.prefix}:${job.queueName}:${job.id}:lock`,
    token,
    attempt: randomUUID(),
  };
}

/** Events written to a job's log (or about to be) by one writer, in the order emitted. */
interface JobLog {
  /** The log's key, and the attempt that writes it, if a worker's (see `logId`). */
  id: string;
  job: JobRef;
  key: string;
  fence: WriteFence | undefined;
  /** Emitted, not yet sent. */
  queued: JobEventBody[];
  /** Settles once every append sent so far has landed; rejected for good once one gave up. */
  sent: Promise<void>;
  /** Appends sent and not yet settled. */
  inFlight: number;
  /** A worker's append gave up: nothing more of this attempt is written (see `breakOff`). */
  broken: boolean;
  /** How long the log is kept after its last append, in s. */
  keepS: number;
}

export interface EventWriterOptions {
  /**
   * How long an append that failed is sent again before the writer gives up on the job's log
   * (ms; 0: never again). Workers retry through a failover, the API fails fast instead.
   * @defaultValue 0
   */
  retryForMs?: number;
}

/**
 * The writing side of job event logs. Events of one event-loop turn go out together: one
 * script call per job, on a connection that pipelines what one turn sends (per node, on a
 * cluster, where one pipeline may not span slots).
 *
 * A job's appends land in the order emitted, one at a time: while one is in flight, later
 * events wait and go together in the next. An append that fails (a primary dying, a failover's
 * CLUSTERDOWN or READONLY, a timeout) is sent again with its call id, for up to `retryForMs`:
 * dropping it would leave a gap in the log, or a log that never gets its `done` and readers
 * that wait for it forever. Flushes that wait on an append that gave up reject; a worker's
 * attempt then writes nothing more (never a log with a hole in it).
 */
export class EventWriter {
  private readonly logs = new Map<string, JobLog>();
  /** Logs with events emitted and not yet sent. */
  private readonly dirty = new Set<JobLog>();
  private scheduled = false;

  private fenceLost: (fence: WriteFence) => void = () => {};
  /** Names this writer's calls: `<writer>.<n>`, unique across processes and restarts. */
  private readonly writerId = randomUUID();
  private calls = 0;
  private readonly append: LuaCommand<number>;
  private readonly retryForMs: number;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
    options: EventWriterOptions = {},
  ) {
    this.append = new LuaCommand(redis, "ferryAppendEvents", 3, APPEND);
    this.retryForMs = options.retryForMs ?? 0;
  }

  /**
   * `listener` is called with a fence whose writes stopped landing: its write was refused (the
   * job's lock belongs to another worker now) or was given up on. Either way whatever this
   * attempt still computes for the job is wasted.
   */
  onFenceLost(listener: (fence: WriteFence) => void): void {
    this.fenceLost = listener;
  }

  /** Whether the attempt writing `job`'s log under `fence` had an append given up on. */
  gaveUp(job: JobRef, fence: WriteFence | undefined): boolean {
    return this.logs.get(logId(this.keys.events(job), fence))?.broken === true;
  }

  /**
   * Queues events for a job; they are written together at the end of this turn. The log is
   * kept `keepS` after its last append (the writer's TTL when not given).
   */
  emit(job: JobRef, events: JobEventBody[], fence?: WriteFence, keepS?: number): void {
    const key = this.keys.events(job);
    const id = logId(key, fence);
    let log = this.logs.get(id);
    if (!log) {
      log = {
        id,
        job,
        key,
        fence,
        queued: [],
        sent: Promise.resolve(),
        inFlight: 0,
        broken: false,
        keepS: keepS ?? this.ttlS,
      };
      this.logs.set(id, log);
    }
    if (log.broken) return;
    log.queued.push(...events);
    this.dirty.add(log);
    if (!this.scheduled) {
      this.scheduled = true;
      // a failed write surfaces at the next explicit flush; a timer has nobody to tell
      setImmediate(() => this.sendQueued());
    }
  }

  /**
   * Sends everything queued; resolves once Redis has all that was emitted so far, and rejects
   * if any of it was given up on. With `job` (and the `fence` it was emitted under), only that
   * job's events count; without, every log not already given up on. A log with nothing in
   * flight is sent at once, in this call: a caller may rely on its order against commands it
   * sends on the same connection right after.
   */
  async flush(job?: JobRef, fence?: WriteFence): Promise<void> {
    this.sendQueued();
    if (job) {
      await this.logs.get(logId(this.keys.events(job), fence))?.sent;
      return;
    }
    await Promise.all([...this.logs.values()].filter((l) => !l.broken).map((l) => l.sent));
  }

  private sendQueued(): void {
    this.scheduled = false;
    // every job's append of this turn in one write (a decode step emits for each sequence)
    inOneWrite(this.redis, () => {
      for (const log of this.dirty) this.send(log);
    });
    this.dirty.clear();
  }

  /** Sends a log's queued events as one append, after the appends already on their way. */
  private send(log: JobLog): void {
    if (log.queued.length === 0) return;
    const events = log.queued.map((e) => JSON.stringify(e));
    log.queued = [];
    const callId = `${this.writerId}.${this.calls++}`;
    const write = () => this.write(log, callId, events);
    log.inFlight++;
    // behind an append still on its way, else at once
    log.sent = (log.inFlight === 1 ? write() : log.sent.then(write)).then(
      () => {
        // a log nothing more is owed to is forgotten
        if (--log.inFlight === 0 && log.queued.length === 0) this.logs.delete(log.id);
      },
      (err: unknown) => {
        log.inFlight--;
        if (log.fence) this.breakOff(log);
        else if (log.inFlight === 0 && log.queued.length === 0) this.logs.delete(log.id);
        throw err;
      },
    );
    // a rejection is the flush's to report; an unobserved one must not crash the process
    log.sent.catch(() => undefined);
  }

  /**
   * A worker's attempt whose append gave up writes nothing more: its later events would
   * follow a hole in the log. It is told (as when its lock is lost), and the job's next
   * attempt resumes from what the log holds. The log is kept (empty) to refuse the attempt's
   * late events until it would have expired anyway.
   */
  private breakOff(log: JobLog): void {
    if (log.broken) return;
    log.broken = true;
    log.queued = [];
    setTimeout(() => this.logs.delete(log.id), log.keepS * 1_000).unref();
    if (log.fence) this.fenceLost(log.fence);
  }

  /** One append, sent again (same call id, so at most once in the log) until it lands. */
  private async write(log: JobLog, callId: string, events: string[]): Promise<void> {
    const written = await retrying(
      () =>
        this.append.run(
          this.redis,
          log.key,
          log.fence?.lockKey ?? log.key,
          this.keys.eventsApplied(log.job),
          log.key,
          String(MAX_EVENTS),
          String(log.keepS),
          log.fence?.token ?? "",
          callId,
          ...events,
        ),
      this.retryForMs,
      transient,
    );
    if (written === -1 && log.fence) this.fenceLost(log.fence);
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

/**
 * Which of a writer's logs events go to: one per job attempt, so that a job that came back to
 * the same worker writes afresh, not behind (or refused with) the appends of its earlier one.
 */
function logId(key: string, fence: WriteFence | undefined): string {
  return fence ? `${key} ${fence.attempt}` : key;
}

/** Stream ids compare as (ms, seq) pairs. */
export function streamIdAfter(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am > bm || (am === bm && as > bs);
}
