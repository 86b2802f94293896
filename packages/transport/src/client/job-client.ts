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
} from "@ferry/protocol";
import { Job, type Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import { type AcceptReplicas, ensureReplicated } from "../shared/durable-accept.js";
import type { EventWriter } from "../shared/event-log.js";
import {
  emptyRecord,
  type JobIndexEntry,
  type JobRecord,
  jobStatusOf,
  parseFailure,
} from "../shared/job-records.js";
import type { JobRef, Keys } from "../shared/keys.js";
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
/** Jobs one sweep expires at most; the next sweep takes the rest. */
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
     * Closes the logs of jobs this client removed from their queue (cancelled, expired): its
     * appends are retried through a Redis outage, since nobody else will ever close them.
     */
    private readonly closer: EventWriter,
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
        const data: GenerateJob = { ...job, v: WIRE_VERSION, kind: "generate", accepted_at: now };
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
    const removed = await job.remove().then(
      () => true,
      () => false, // taken by a worker meanwhile: it holds the lock now
    );
    if (!removed) return false;
    await guarded(() => this.redis.set(this.keys.cancelled(id), EXPIRED, "EX", this.ttlS));
    const ref = { queue: index.queue, id };
    this.closer.emit(ref, [
      { type: "error", error: { code: "DEADLINE_EXCEEDED", message: NOT_COMPUTED } },
      { type: "done" },
    ]);
    await this.closer.flush(ref);
    return true;
  }

  /**
   * Expires every job whose deadline has passed while it waited, whether or not anyone polls
   * or follows it and whether or not a worker is up (a model scaled to zero, say). Each API
   * replica sweeps; expiring is idempotent, so they need no coordination.
   */
  async sweepDeadlines(now = Date.now()): Promise<number> {
    const due = await this.redis.zrangebyscore(
      this.keys.deadlines,
      "-inf",
      now,
      "LIMIT",
      0,
      SWEEP_BATCH,
    );
    let expired = 0;
    for (const id of due) if (await this.expire(id).catch(() => false)) expired++;
    if (due.length > 0) await this.redis.zrem(this.keys.deadlines, ...due);
    return expired;
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
    // An active job holds a lock and cannot be removed; its worker drops it on the broadcast.
    const removed = await job?.remove().then(
      () => true,
      () => false,
    );
    if (removed) {
      // nobody will run it now, so nobody else will close its event log
      this.closer.emit({ queue, id }, [
        { type: "error", error: { code: "CANCELLED", message: "job was cancelled" } },
        { type: "done" },
      ]);
      await this.closer.flush({ queue, id });
    }
    return this.get(id);
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
    await guarded(async () => {
      const { name, data } = build(now);
      // a reader that connects before any worker takes the job sees it queued
      this.writer.emit({ queue, id }, [{ type: "status", status: "queued" }]);
      // One round trip, not three: one connection runs commands in the order they were sent,
      // so the index and the first event are stored before any worker can see the job (on a
      // cluster the event and the job share their queue's slot, so its node's connection).
      await Promise.all([
        this.redis.set(this.keys.jobQueue(id), JSON.stringify(index), "EX", this.ttlS),
        ...(job.deadline === undefined
          ? []
          : [this.redis.zadd(this.keys.deadlines, job.deadline, id)]),
        this.writer.flush({ queue, id }),
        this.queue(queue).add(name, data, {
          jobId: id,
          priority: bullPriority(options.priority),
          removeOnComplete: { age: this.ttlS },
          removeOnFail: { age: this.ttlS },
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
