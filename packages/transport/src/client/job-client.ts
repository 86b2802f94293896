import { randomUUID } from "node:crypto";
import {
  bullPriority,
  type CompletionResult,
  type GenerateJob,
  type InferJob,
  type InferReply,
  type JobEvent,
  queueName,
  type RowInputs,
  TERMINAL_STATUSES,
  WIRE_VERSION,
  type WireError,
} from "@ferry/protocol";
import { Job, type Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import { type AcceptReplicas, ensureReplicated } from "../shared/durable-accept.js";
import { type EventWriter, parseEntry } from "../shared/event-log.js";
import {
  emptyRecord,
  type JobIndexEntry,
  type JobRecord,
  jobStatusOf,
  parseFailure,
} from "../shared/job-records.js";
import type { JobRef, Keys } from "../shared/keys.js";
import type { LogCloser } from "../shared/log-closer.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import type { EventReader } from "./event-reader.js";
import type { QueueDepth } from "./queue-depth.js";

/** How a job is queued and whose it is. */
export interface EnqueueOptions {
  /** 1 (lowest) to 10 (highest). */
  priority: number;
  /** Requests waiting past which the queue refuses new ones with QUEUE_FULL. */
  maxQueueSize: number;
  /** The tenant the job belongs to ("" when the API is open to all). */
  owner: string;
  /**
   * How long the job, its answer and its event log are kept once it ends, in s: less than
   * an async job's for a sync completion, kept only so that its stream can be resumed.
   * @defaultValue the client's jobTtlS (JOB_TTL_S)
   */
  keepS?: number | undefined;
}

export interface AsyncJobRequest extends EnqueueOptions {
  model: string;
  version: string;
  rows: RowInputs[];
  /** Epoch ms after which the rows must not be computed. */
  deadline: number;
  /** Opaque to workers: what the API needs to render the result when polled. */
  meta: Record<string, unknown>;
}

/** A completion as the API hands it over; the transport adds the wire fields. */
export type GenerateRequest = Omit<GenerateJob, "v" | "kind" | "accepted_at">;

/** Marks an expired job under Keys.cancelled, where "1" marks a cancelled one. */
const EXPIRED = "expired";
const NOT_COMPUTED = "deadline passed while queued; not computed";
/** BullMQ states of a job no worker has taken yet. */
const WAITING_STATES = ["waiting", "prioritized", "delayed", "waiting-children"];
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

/**
 * Async jobs: one BullMQ job each, that can be polled, followed (events), cancelled, and
 * outlives the API process that took it. An index key maps the public id to its queue.
 */
export class JobClient {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    private readonly depth: QueueDepth,
    private readonly writer: EventWriter,
    /**
     * Ends the logs of jobs this client removed from their queue (cancelled, expired): retried
     * through a Redis outage, since no worker will ever write to them.
     */
    private readonly closer: LogCloser,
    private readonly reader: EventReader,
    private readonly control: ControlChannel,
    private readonly ttlS: number,
    /** Replicas an accepted job must have reached (WAIT), and how long that may take. */
    private readonly accept: AcceptReplicas,
  ) {}

  /** Enqueues classifier rows as one job. */
  async submit(req: AsyncJobRequest): Promise<JobRecord> {
    const id = randomUUID();
    return this.enqueue(
      id,
      { model: req.model, version: req.version, deadline: req.deadline, meta: req.meta },
      req,
      (now) => {
        const data: InferJob = {
          v: WIRE_VERSION,
          kind: "infer",
          model: req.model,
          version: req.version,
          rows: req.rows.map((inputs, k) => ({
            rid: `${id}.${k}`,
            inputs,
            deadline: req.deadline,
          })),
          accepted_at: now,
          meta: req.meta,
        };
        return { name: "infer", data };
      },
    );
  }

  /** Enqueues a completion (one job each); its tokens arrive through `events`. */
  async submitGenerate(
    job: GenerateRequest,
    options: EnqueueOptions,
    id: string = randomUUID(),
  ): Promise<JobRecord> {
    return this.enqueue(
      id,
      { model: job.model, version: job.version, deadline: job.deadline, meta: job.meta ?? {} },
      options,
      (now) => {
        const data: GenerateJob = {
          ...job,
          v: WIRE_VERSION,
          kind: "generate",
          accepted_at: now,
          ...(options.keepS === undefined ? {} : { keep_s: options.keepS }),
        };
        return { name: "generate", data };
      },
    );
  }

  /**
   * Enqueues a completion and follows its events: the subscription is made while the job is
   * stored, not after, which takes a round trip off the time to the first token.
   */
  async submitGenerateFollowing(
    job: GenerateRequest,
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<{ record: JobRecord; events: AsyncGenerator<JobEvent>; close: () => void }> {
    assertReady(this.redis);
    const id = randomUUID();
    const queue = queueName(job.model, job.version);
    const [follow, record] = await Promise.allSettled([
      guarded(() => this.reader.open({ queue, id })),
      this.submitGenerate(job, options, id),
    ]);
    if (record.status === "rejected") {
      if (follow.status === "fulfilled") follow.value.close();
      throw record.reason;
    }
    if (follow.status === "rejected") throw follow.reason;
    return {
      record: record.value,
      events: this.untilDeadline(id, job.deadline, follow.value.events(undefined, signal)),
      close: follow.value.close,
    };
  }

  /**
   * A job's events after `after` (a stream id), live until its `done` event. A job still
   * queued at its deadline is expired then, so the stream ends on time with or without workers.
   */
  events(
    record: JobRecord,
    after: string | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<JobEvent> {
    assertReady(this.redis);
    return this.untilDeadline(
      record.id,
      record.deadline,
      this.reader.read(
        { queue: queueName(record.model, record.version), id: record.id },
        after,
        signal,
      ),
    );
  }

  /**
   * Passes a job's events through; if none says it started before `deadline`, the job is
   * expired (removed from its queue, its log closed with DEADLINE_EXCEEDED), which ends the
   * stream. The API owns the deadline: no worker has to be up for it to hold.
   */
  private async *untilDeadline(
    id: string,
    deadline: number | undefined,
    events: AsyncGenerator<JobEvent>,
  ): AsyncGenerator<JobEvent> {
    if (deadline === undefined) return yield* events;
    let started = false;
    const timer = setTimeout(
      () => {
        if (!started) void this.expire(id).catch(() => undefined);
      },
      Math.max(0, deadline - Date.now()),
    );
    timer.unref();
    try {
      for await (const event of events) {
        if (event.body.type !== "status" || event.body.status !== "queued") started = true;
        yield event;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Expires a job still waiting in its queue: it is removed (so no worker ever computes it),
   * marked expired for polls, and its log closed with DEADLINE_EXCEEDED. False when a worker
   * holds it already (BullMQ refuses to remove a locked job).
   */
  async expire(id: string): Promise<boolean> {
    const index = await this.index(id);
    if (!index) return false;
    const job = await guarded(() => Job.fromId(this.queue(index.queue), id));
    // only a job still waiting: a finished one keeps its answer, and a running one its worker
    const state = await job?.getState();
    if (!job || !WAITING_STATES.includes(state ?? "")) return false;
    return this.removeQueued(job, index.queue, "DEADLINE_EXCEEDED", () =>
      guarded(() => this.redis.set(this.keys.cancelled(id), EXPIRED, "EX", this.ttlS)),
    );
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
    code: RemovalCode,
    marked?: () => Promise<unknown>,
  ): Promise<boolean> {
    const id = job.id ?? "";
    const intent = JSON.stringify([id, queue, code]);
    await guarded(() => this.redis.zadd(this.keys.removals, Date.now(), intent));
    // a failed removal leaves its intent: the sweep finds the job still there and drops it
    // (were it removed after all, say a reply lost to a timeout, the sweep ends its log)
    const removed = await job.remove().then(
      () => true,
      () => false,
    );
    if (!removed) return false;
    await marked?.();
    // refused past the closer's retries: a 503, and the sweep ends the log later
    await guarded(() => this.closer.end({ queue, id }, REMOVAL_ERRORS[code]));
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
        const [id, queue, code] = JSON.parse(intent) as [string, string, RemovalCode];
        if (!(await Job.fromId(this.queue(queue), id))) {
          if (code === "DEADLINE_EXCEEDED")
            await this.redis.set(this.keys.cancelled(id), EXPIRED, "EX", this.ttlS, "NX");
          if (await this.closer.end({ queue, id }, REMOVAL_ERRORS[code])) ended++;
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

  private async index(id: string): Promise<JobIndexEntry | undefined> {
    const raw = await guarded(() => this.redis.get(this.keys.jobQueue(id)));
    return raw ? (JSON.parse(raw) as JobIndexEntry) : undefined;
  }

  /** The job's state as a poll reports it; undefined when the id is unknown or expired. */
  async get(id: string): Promise<JobRecord | undefined> {
    assertReady(this.redis);
    const [rawIndex, cancelled] = await guarded(() =>
      this.redis.mget(this.keys.jobQueue(id), this.keys.cancelled(id)),
    );
    if (!rawIndex) return undefined;
    const index = JSON.parse(rawIndex) as JobIndexEntry;
    const queue = this.queue(index.queue);
    // the state first, then the job: a job that finishes between the two reads is then read
    // with its answer (a worker stores the answer and the state in one script)
    const state = await guarded(() => queue.getJobState(id));
    const job = await guarded(() =>
      Job.fromId<InferJob | GenerateJob, InferReply | CompletionResult>(queue, id),
    );
    if (!job) {
      // Removed while queued by a cancel or at its deadline, or lost between writing the
      // index and the job.
      if (cancelled === EXPIRED)
        return {
          ...emptyRecord(id, index, "expired"),
          error: { code: "DEADLINE_EXCEEDED", message: NOT_COMPUTED },
        };
      if (cancelled) return emptyRecord(id, index, "cancelled");
      return {
        ...emptyRecord(id, index, "failed"),
        error: { code: "UNAVAILABLE", message: "job was not stored" },
      };
    }
    if (
      WAITING_STATES.includes(state) &&
      index.deadline !== undefined &&
      Date.now() >= index.deadline
    ) {
      // nobody took it in time: it never will be computed, whether or not a poll asks
      if (await this.expire(id)) return this.get(id);
    }
    const status = jobStatusOf(state, job.failedReason, cancelled !== null);
    if (status === "running") {
      // A worker ends a job's log before BullMQ records the job's end (see giveBack): a client
      // that followed the log to its end and polls at once is answered as the log ended
      const ended = await this.endOfLog({ queue: index.queue, id });
      if (ended)
        return {
          ...emptyRecord(id, index, "running"),
          started_at: job.processedOn ?? null,
          ...ended,
        };
    }
    const record = emptyRecord(id, index, status);
    return {
      ...record,
      started_at: job.processedOn ?? null,
      finished_at: job.finishedOn ?? null,
      result: status === "succeeded" ? (job.returnvalue ?? null) : null,
      error:
        status !== "cancelled" && state === "failed"
          ? parseFailure(job.failedReason)
          : record.error,
    };
  }

  /** How a job's log ended (its result or error, then `done`); undefined while it is open. */
  private async endOfLog(
    ref: JobRef,
  ): Promise<Pick<JobRecord, "status" | "finished_at" | "result" | "error"> | undefined> {
    const tail = (
      await guarded(() => this.redis.xrevrange(this.keys.events(ref), "+", "-", "COUNT", 3))
    ).map(parseEntry);
    if (tail[0]?.body.type !== "done") return undefined;
    const end = tail.find((e) => e.body.type === "result" || e.body.type === "error");
    const finished_at = Number(end?.id.split("-")[0]);
    if (end?.body.type === "result")
      return { status: "succeeded", finished_at, result: end.body.result, error: null };
    if (end?.body.type !== "error") return undefined;
    const error = parseFailure(`${end.body.error.code}: ${end.body.error.message}`);
    const status =
      error.code === "DEADLINE_EXCEEDED"
        ? "expired"
        : error.code === "CANCELLED"
          ? "cancelled"
          : "failed";
    return { status, finished_at, result: null, error };
  }

  /** Cancels a job: a queued one never runs; a running one is told to stop on every worker. */
  async cancel(id: string): Promise<JobRecord | undefined> {
    const record = await this.get(id);
    if (!record || TERMINAL_STATUSES.includes(record.status)) return record;
    await guarded(() =>
      this.control
        .cancel(this.redis.multi().set(this.keys.cancelled(id), "1", "EX", this.ttlS), id)
        .exec(),
    );
    // the record came from the job's index: its queue is its model version's
    const queue = queueName(record.model, record.version);
    const job = await Job.fromId(this.queue(queue), id);
    // A running job is left to its worker, which drops it on the broadcast (BullMQ refuses to
    // remove a job whose lock a worker holds).
    if (job && record.status === "queued") await this.removeQueued(job, queue, "CANCELLED");
    return this.get(id);
  }

  /**
   * Deletes a job: a finished one's entry, answer and event log go now; one still queued or
   * running is cancelled first (as `cancel`), and what its worker writes as it stops goes
   * with BullMQ's and the log's own expiry. Either way its index goes, so that every poll,
   * follow and read-back from now on finds no such job. Undefined when the id is unknown.
   */
  async delete(id: string): Promise<JobRecord | undefined> {
    const before = await this.get(id);
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
  async forget(id: string, withinMs = 5_000): Promise<void> {
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

  private async enqueue(
    id: string,
    job: Pick<JobIndexEntry, "model" | "version" | "deadline" | "meta">,
    options: EnqueueOptions,
    build: (now: number) => { name: string; data: InferJob | GenerateJob },
  ): Promise<JobRecord> {
    assertReady(this.redis);
    const queue = queueName(job.model, job.version);
    await this.depth.admit(queue, options.maxQueueSize, true);
    const now = Date.now();
    const index: JobIndexEntry = { ...job, queue, created_at: now, owner: options.owner };
    const keepS = options.keepS ?? this.ttlS;
    await guarded(async () => {
      const { name, data } = build(now);
      // a reader that connects before any worker takes the job sees it queued
      this.writer.emit({ queue, id }, [{ type: "status", status: "queued" }], undefined, keepS);
      // One round trip, not three: one connection runs commands in the order they were sent,
      // so the index and the first event are stored before any worker can see the job (on a
      // cluster the event and the job share their queue's slot, so its node's connection).
      await Promise.all([
        // (counted from now: the job may wait to its deadline before it starts)
        this.redis.set(
          this.keys.jobQueue(id),
          JSON.stringify(index),
          "EX",
          keepS + Math.ceil(Math.max(0, (job.deadline ?? now) - now) / 1000),
        ),
        ...(job.deadline === undefined
          ? []
          : [this.redis.zadd(this.keys.deadlines, job.deadline, id)]),
        this.writer.flush({ queue, id }),
        this.queue(queue).add(name, data, {
          jobId: id,
          priority: bullPriority(options.priority),
          removeOnComplete: { age: keepS },
          removeOnFail: { age: keepS },
        }),
      ]);
    });
    await this.replicated({ queue, id }, job.deadline !== undefined);
    return emptyRecord(id, index, "queued");
  }

  /**
   * An accepted job survives a failover of any shard it was written to: its queue entry and
   * first event (its queue's), its index and its deadline (theirs).
   */
  private async replicated(job: JobRef, deadline: boolean): Promise<void> {
    const written = [this.keys.events(job), this.keys.jobQueue(job.id)];
    if (deadline) written.push(this.keys.deadlines);
    await guarded(() =>
      ensureReplicated(this.redis, written, this.accept, `job ${job.id}`, `/v1/jobs/${job.id}`),
    );
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
