import { randomUUID } from "node:crypto";
import {
  BATCH_BAND,
  bullPriority,
  type GenerateJob,
  type InferJob,
  type JobEvent,
  priorityBand,
  queueName,
  type RowInputs,
  type TraceCarrierWire,
  WIRE_VERSION,
} from "@ferry/protocol";
import type { Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import { type AcceptReplicas, ensureReplicated } from "../shared/durable-accept.js";
import type { EventWriter } from "../shared/event-log.js";
import { emptyRecord, type JobIndexEntry, type JobRecord } from "../shared/job-records.js";
import type { JobRef, Keys } from "../shared/keys.js";
import type { LogCloser } from "../shared/log-closer.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import type { EventReader } from "./event-reader.js";
import type { AdmittedPlace, JobAdmission } from "./job-admission.js";
import { JobPolls } from "./job-polls.js";
import { JobRemoval } from "./job-removal.js";

/** How a job is queued and whose it is. */
export interface EnqueueOptions {
  /** 1 (lowest) to 10 (highest). */
  priority: number;
  /** Requests waiting past which the queue refuses new ones with QUEUE_FULL. */
  maxQueueSize: number;
  /** The tenant the job belongs to ("" when the API is open to all). */
  owner: string;
  /**
   * The owner is one tenant among several (an API key, not the admin): its waiting jobs are
   * held to its share of the queue (the client's keyQueueShare).
   */
  shared?: boolean | undefined;
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
  /** The request's trace context, carried to the worker (absent when tracing is off). */
  trace?: TraceCarrierWire | undefined;
}

/** A job being followed as it is enqueued: its record, its events, and how to stop reading. */
export interface FollowedJob {
  record: JobRecord;
  events: AsyncGenerator<JobEvent>;
  close: () => void;
}

/** A completion as the API hands it over; the transport adds the wire fields. */
export type GenerateRequest = Omit<GenerateJob, "v" | "kind" | "accepted_at">;

/**
 * Async jobs: one BullMQ job each, that can be polled, followed (events), cancelled, and
 * outlives the API process that took it. An index key maps the public id to its queue.
 */
export class JobClient {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    /** Whether a job may be queued: its queue's depth, its owner's share. */
    private readonly admission: JobAdmission,
    private readonly writer: EventWriter,
    /**
     * Ends the logs of jobs this client removed from their queue (cancelled, expired): retried
     * through a Redis outage, since no worker will ever write to them.
     */
    closer: LogCloser,
    private readonly reader: EventReader,
    control: ControlChannel,
    private readonly ttlS: number,
    /** Replicas an accepted job must have reached (WAIT), and how long that may take. */
    private readonly accept: AcceptReplicas,
  ) {
    this.polls = new JobPolls(redis, keys, queue, (id) => this.removal.expire(id));
    this.removal = new JobRemoval(redis, keys, queue, closer, control, ttlS, this.polls);
  }

  /** What a poll reads of a job: its index, BullMQ's record of it, its log's end. */
  private readonly polls: JobPolls;

  /** Cancels, expires, deletes and sweeps: what takes a job out of its queue (`JobRemoval`). */
  readonly removal: JobRemoval;

  /** Cancels a job: a queued one never runs; a running one is told to stop on every worker. */
  cancel(id: string): Promise<JobRecord | undefined> {
    return this.removal.cancel(id);
  }

  /** Deletes a job, cancelling it first if it has not ended (`JobRemoval.delete`). */
  delete(id: string): Promise<JobRecord | undefined> {
    return this.removal.delete(id);
  }

  /** Deletes a job and anything of it its worker still writes (`JobRemoval.forget`). */
  forget(id: string, withinMs?: number): Promise<void> {
    return this.removal.forget(id, withinMs);
  }

  /** Enqueues classifier rows as one job (under `id` when the caller names it). */
  async submit(req: AsyncJobRequest, id: string = randomUUID()): Promise<JobRecord> {
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
            ...(req.trace ? { trace: req.trace } : {}),
          })),
          accepted_at: now,
          meta: req.meta,
        };
        return { name: "infer", data };
      },
    );
  }

  /**
   * Enqueues a completion (one job each); its tokens arrive through `events`. `place`: admitted
   * already (`JobAdmission.admitAll`).
   */
  async submitGenerate(
    job: GenerateRequest,
    options: EnqueueOptions,
    id: string = randomUUID(),
    place?: AdmittedPlace,
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
      place,
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
  ): Promise<FollowedJob> {
    assertReady(this.redis);
    return this.followWhileStored(job, options, randomUUID(), undefined, signal);
  }

  /**
   * Several completions of one request, on one queue (its choices), enqueued and followed
   * together: admitted all at once or none (QUEUE_FULL), then stored side by side. One that
   * fails to be stored cancels the others.
   */
  async submitGenerateFollowingAll(
    jobs: readonly GenerateRequest[],
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<FollowedJob[]> {
    assertReady(this.redis);
    const [first] = jobs;
    if (!first) return [];
    const queue = queueName(first.model, first.version);
    if (jobs.some((job) => queueName(job.model, job.version) !== queue))
      throw new Error("submitGenerateFollowingAll: the jobs of one call share a queue");
    const ids = jobs.map(() => randomUUID());
    const places = await this.admission.admitAll(queue, ids, options);
    const settled = await Promise.allSettled(
      jobs.map((job, k) =>
        this.followWhileStored(job, options, ids[k] as string, places[k], signal),
      ),
    );
    const failed = settled.find((one) => one.status === "rejected");
    const followed = settled.flatMap((one) => (one.status === "fulfilled" ? [one.value] : []));
    if (!failed) return followed;
    await Promise.all(
      followed.map(async (one) => {
        one.close();
        await this.cancel(one.record.id).catch(() => undefined);
      }),
    );
    throw failed.reason;
  }

  /** Opens job `id`'s events while it is enqueued (admitted already when `place` is given). */
  private async followWhileStored(
    job: GenerateRequest,
    options: EnqueueOptions,
    id: string,
    place: AdmittedPlace | undefined,
    signal?: AbortSignal,
  ): Promise<FollowedJob> {
    const queue = queueName(job.model, job.version);
    const [follow, record] = await Promise.allSettled([
      guarded(() => this.reader.open({ queue, id })),
      this.submitGenerate(job, options, id, place),
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
        if (!started) void this.removal.expire(id).catch(() => undefined);
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

  /** Where a job is queued (its index entry); undefined when the id is unknown. */
  index(id: string): Promise<JobIndexEntry | undefined> {
    return this.polls.index(id);
  }

  /** The job's state as a poll reports it; undefined when the id is unknown or expired. */
  get(id: string): Promise<JobRecord | undefined> {
    return this.polls.get(id);
  }

  private async enqueue(
    id: string,
    job: Pick<JobIndexEntry, "model" | "version" | "deadline" | "meta">,
    options: EnqueueOptions,
    build: (now: number) => { name: string; data: InferJob | GenerateJob },
    /** Admitted already (else admitted here). */
    admitted?: AdmittedPlace,
  ): Promise<JobRecord> {
    assertReady(this.redis);
    const queue = queueName(job.model, job.version);
    const place = admitted ?? (await this.admission.admit(queue, id, options));
    const now = Date.now();
    const keepS = options.keepS ?? this.ttlS;
    const index: JobIndexEntry = {
      ...job,
      queue,
      created_at: now,
      owner: options.owner,
      ...(keepS < this.ttlS ? { keep_s: keepS } : {}),
    };
    // the index and the log outlive the wait too: a job may sit queued to its deadline, and a
    // log that expired first had ended its readers with no result while the job still waited
    const holdS = keepS + Math.ceil(Math.max(0, (job.deadline ?? now) - now) / 1000);
    const stored = guarded(async () => {
      const { name, data } = build(now);
      // a reader that connects before any worker takes the job sees it queued
      this.writer.emit({ queue, id }, [{ type: "status", status: "queued" }], undefined, holdS);
      // One round trip, not three: one connection runs commands in the order they were sent,
      // so the index and the first event are stored before any worker can see the job (on a
      // cluster the event and the job share their queue's slot, so its node's connection).
      await Promise.all([
        this.redis.set(this.keys.jobQueue(id), JSON.stringify(index), "EX", holdS),
        ...(job.deadline === undefined
          ? []
          : [this.redis.zadd(this.keys.deadlines, job.deadline, id)]),
        this.writer.flush({ queue, id }),
        this.queue(queue)
          .add(name, data, {
            jobId: id,
            priority: bullPriority(options.priority, place.turn),
            removeOnComplete: { age: keepS },
            removeOnFail: { age: keepS },
          })
          .then(() => {
            // a count of the queue from now on has it
            place.landed();
            // once the job is in its queue, so that a worker woken by the word finds it; a
            // hint only: not waited for, and its failure fails nothing
            if (data.kind === "generate" && priorityBand(options.priority) < BATCH_BAND)
              this.redis.spublish(this.keys.interactiveQueued(queue), "").catch(() => undefined);
          }),
      ]);
    });
    await stored.catch((err: unknown) => {
      place.withdraw();
      throw err;
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
