import { queueName, TERMINAL_STATUSES, type WireError } from "@ferry/protocol";
import { Job, type Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import type { JobIndexEntry, JobRecord } from "../shared/job-records.js";
import type { Keys } from "../shared/keys.js";
import type { LogCloser } from "../shared/log-closer.js";
import { guarded } from "../shared/redis-guard.js";

/** Marks an expired job under Keys.cancelled, where "1" marks a cancelled one. */
export const EXPIRED_MARK = "expired";
export const NOT_COMPUTED = "deadline passed while queued; not computed";
/** BullMQ states of a job no worker has taken yet. */
export const WAITING_STATES = ["waiting", "prioritized", "delayed", "waiting-children"];
/**
 * How long after a removal began any API replica's sweep may end the job's log in its
 * remover's place: well past the remover's own retries of the close (10 s) and any command's
 * timeout, so that a sweep never judges a removal still under way.
 */
const REMOVAL_GRACE_MS = 60_000;
/** Why the API removed a job from its queue, as its log's end says. */
type RemovalCode = "CANCELLED" | "DEADLINE_EXCEEDED";
const REMOVAL_ERRORS: Record<RemovalCode, WireError> = {
  CANCELLED: { code: "CANCELLED", message: "job was cancelled" },
  DEADLINE_EXCEEDED: { code: "DEADLINE_EXCEEDED", message: NOT_COMPUTED },
};
/** Jobs one sweep expires (or ends the logs of) at most; the next sweep takes the rest. */
const SWEEP_BATCH = 200;

/** What removal reads of a job: where it is queued, and its state as a poll reports it. */
export interface JobRecords {
  index(id: string): Promise<JobIndexEntry | undefined>;
  get(id: string): Promise<JobRecord | undefined>;
}

/** How long a forget waits for a running job's worker to let go before leaving the rest to expiry. */
export const FORGET_WITHIN_MS = 5_000;

/**
 * What takes an async job out of its queue before a worker does (BullMQ's own removal, split
 * from the submit-and-read side as BullMQ splits its queue's roles): a cancel, an expiry at the
 * deadline, a delete, and the sweeps every API replica runs so that a removal its remover could
 * not finish still ends the job's log.
 */
export class JobRemoval {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    /**
     * Ends the logs of jobs removed from their queue (cancelled, expired): retried through a
     * Redis outage, since no worker will ever write to them.
     */
    private readonly closer: LogCloser,
    private readonly control: ControlChannel,
    private readonly ttlS: number,
    private readonly records: JobRecords,
  ) {}

  /**
   * Expires a job still waiting in its queue: it is removed (so no worker ever computes it),
   * marked expired for polls, and its log closed with DEADLINE_EXCEEDED. False when a worker
   * holds it already (BullMQ refuses to remove a locked job).
   */
  async expire(id: string): Promise<boolean> {
    const index = await this.records.index(id);
    if (!index) return false;
    const job = await guarded(() => Job.fromId(this.queue(index.queue), id));
    // only a job still waiting: a finished one keeps its answer, and a running one its worker
    const state = await job?.getState();
    if (!job || !WAITING_STATES.includes(state ?? "")) return false;
    const keepS = this.keptFor(index);
    return this.removeQueued(job, index.queue, index.owner ?? "", "DEADLINE_EXCEEDED", keepS, () =>
      guarded(() => this.redis.set(this.keys.cancelled(id), EXPIRED_MARK, "EX", keepS)),
    );
  }

  /** How long a job's marks and log stay once it ends: its own keep where shorter. */
  private keptFor(job: { keep_s?: number | undefined }): number {
    return Math.min(this.ttlS, job.keep_s ?? this.ttlS);
  }

  /**
   * Removes a job from its queue, so that no worker ever takes it, then ends its log with
   * `code` (after `marked`, which tells polls why). The intent to end the log is stored
   * before the removal: if Redis refuses the end for longer than the closer retries it, or
   * this process dies after the removal, any replica's sweep ends the log (`sweepRemovals`),
   * and readers, who follow a log until its end, never wait forever. False when the job was
   * not removed (a worker took it meanwhile: it holds the lock, and ends the log itself).
   */
  private async removeQueued(
    job: Job,
    queue: string,
    owner: string,
    code: RemovalCode,
    keepS: number,
    marked?: () => Promise<unknown>,
  ): Promise<boolean> {
    const id = job.id ?? "";
    const intent = JSON.stringify([id, queue, code, keepS]);
    await guarded(() => this.redis.zadd(this.keys.removals, Date.now(), intent));
    // a failed removal leaves its intent: the sweep finds the job still there and drops it
    // (were it removed after all, say a reply lost to a timeout, the sweep ends its log)
    const removed = await job.remove().then(
      () => true,
      () => false,
    );
    if (!removed) return false;
    // its place in its owner's share of the queue is free now, not once the share's next look
    // finds it gone (a request refused midway gives back the places its first choices took);
    // a hint only: the share's own look frees it later all the same
    await this.redis
      .multi()
      .zrem(this.keys.ownerQueued(queue, owner), id)
      .zrem(this.keys.ownerQueuedLowest(queue, owner), id)
      .exec()
      .catch(() => undefined);
    await marked?.();
    // refused past the closer's retries: a 503, and the sweep ends the log later
    await guarded(() => this.closer.end({ queue, id }, REMOVAL_ERRORS[code], keepS));
    await guarded(() => this.redis.zrem(this.keys.removals, intent));
    return true;
  }

  /**
   * Ends the logs of jobs whose removal began over a minute ago and whose remover left no
   * end (Redis refused it for longer than the closer retried, or the process died): readers
   * of those logs would wait forever. A job still in its queue was not removed: whoever
   * finishes it ends its log. Every replica sweeps; ending a log is idempotent. Returns the
   * logs this sweep ended.
   */
  async sweepRemovals(now = Date.now()): Promise<number> {
    const due = await this.dueIn(this.keys.removals, now - REMOVAL_GRACE_MS);
    let ended = 0;
    for (const intent of due) {
      try {
        // (an intent written before removals kept a job's own keep has none: the deployment's)
        const [id, queue, code, kept] = JSON.parse(intent) as [
          string,
          string,
          RemovalCode,
          number?,
        ];
        const keepS = this.keptFor({ keep_s: kept });
        if (!(await Job.fromId(this.queue(queue), id))) {
          if (code === "DEADLINE_EXCEEDED")
            await this.redis.set(this.keys.cancelled(id), EXPIRED_MARK, "EX", keepS, "NX");
          if (await this.closer.end({ queue, id }, REMOVAL_ERRORS[code], keepS)) ended++;
        }
        await this.redis.zrem(this.keys.removals, intent);
      } catch {
        // Redis failed it: the intent stays for the next sweep
      }
    }
    return ended;
  }

  /**
   * Expires every job whose deadline has passed while it waited, whether or not anyone polls
   * or follows it and whether or not a worker is up (a model scaled to zero, say). Each API
   * replica sweeps; expiring is idempotent, so they need no coordination.
   */
  async sweepDeadlines(now = Date.now()): Promise<number> {
    const due = await this.dueIn(this.keys.deadlines, now);
    let expired = 0;
    const settled: string[] = [];
    for (const id of due) {
      try {
        if (await this.expire(id)) expired++;
        settled.push(id);
      } catch {
        // Redis failed it: the id stays for the next sweep
      }
    }
    if (settled.length > 0) await this.redis.zrem(this.keys.deadlines, ...settled);
    return expired;
  }

  /** One sweep's share of the members of sorted set `key` scored at or before `until`. */
  private dueIn(key: string, until: number): Promise<string[]> {
    return this.redis.zrangebyscore(key, "-inf", until, "LIMIT", 0, SWEEP_BATCH);
  }

  /** Cancels a job: a queued one never runs; a running one is told to stop on every worker. */
  async cancel(id: string): Promise<JobRecord | undefined> {
    const record = await this.records.get(id);
    if (!record || TERMINAL_STATUSES.includes(record.status)) return record;
    const keepS = this.keptFor(record);
    // the mark outlives the job's deadline too: a job whose removal failed stays queued until
    // then, and a worker that takes it reads the mark and drops it
    const markS = keepS + Math.ceil(Math.max(0, (record.deadline ?? 0) - Date.now()) / 1000);
    await guarded(() =>
      this.control
        .cancel(this.redis.multi().set(this.keys.cancelled(id), "1", "EX", markS), id)
        .exec(),
    );
    // the record came from the job's index: its queue is its model version's
    const queue = queueName(record.model, record.version);
    const job = await Job.fromId(this.queue(queue), id);
    // A running job is left to its worker, which drops it on the broadcast (BullMQ refuses to
    // remove a job whose lock a worker holds).
    if (job && record.status === "queued")
      await this.removeQueued(job, queue, record.owner, "CANCELLED", keepS);
    return this.records.get(id);
  }

  /**
   * Deletes a job: a finished one's entry, answer and event log go now; one still queued or
   * running is cancelled first (as `cancel`), and what its worker writes as it stops goes
   * with BullMQ's and the log's own expiry. Either way its index goes, so that every poll,
   * follow and read-back from now on finds no such job. Undefined when the id is unknown.
   */
  async delete(id: string): Promise<JobRecord | undefined> {
    const before = await this.records.get(id);
    if (!before) return undefined;
    const finished = TERMINAL_STATUSES.includes(before.status);
    const record = finished ? before : await this.cancel(id);
    const ref = { queue: queueName(before.model, before.version), id };
    if (finished) {
      const job = await guarded(() => Job.fromId(this.queue(ref.queue), id));
      // a job BullMQ would not let go of (a worker's lock) goes at its expiry
      await job?.remove().catch(() => undefined);
      await guarded(() => this.redis.del(this.keys.events(ref), this.keys.eventsApplied(ref)));
      await guarded(() => this.redis.del(this.keys.cancelled(id)));
    }
    // (a job cancelled just now keeps its mark to its expiry: a worker that takes it in the
    // meantime, past the cancel's broadcast, reads the mark and drops it)
    await guarded(() => this.redis.del(this.keys.jobQueue(id)));
    return record;
  }

  /**
   * Deletes a job as `delete` does, and makes sure that nothing of it stays: its worker may
   * still hold it (it ends the log before the job), and a running one is only cancelled, so
   * its entry is removed again until it lets go (`withinMs` at most, then it goes at its
   * expiry), its log after it. For what a caller asked not to be stored (`store: false`).
   */
  async forget(id: string, withinMs = FORGET_WITHIN_MS): Promise<void> {
    const before = await this.delete(id);
    if (!before) return;
    const ref = { queue: queueName(before.model, before.version), id };
    for (const until = Date.now() + withinMs; ; await sleep(100)) {
      const job = await guarded(() => Job.fromId(this.queue(ref.queue), id));
      const removed = await job?.remove().then(
        () => true,
        () => false,
      );
      if (!job || removed || Date.now() > until) break;
    }
    await guarded(() => this.redis.del(this.keys.events(ref), this.keys.eventsApplied(ref)));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
