import { randomUUID } from "node:crypto";
import {
  BATCH_BAND,
  bullPriority,
  type GenerateJob,
  type InferJob,
  type JobEvent,
  priorityBand,
  queueName,
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
import { type FollowedJob, JobFollows } from "./job-follows.js";
import type { AsyncJobRequest, EnqueueOptions, GenerateRequest } from "./job-requests.js";

export type { AsyncJobRequest, EnqueueOptions, GenerateRequest } from "./job-requests.js";

import { JobPolls } from "./job-polls.js";
import { JobRemoval } from "./job-removal.js";

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
    reader: EventReader,
    control: ControlChannel,
    private readonly ttlS: number,
    /** Replicas an accepted job must have reached (WAIT), and how long that may take. */
    private readonly accept: AcceptReplicas,
  ) {
    this.polls = new JobPolls(redis, keys, queue, (id) => this.removal.expire(id));
    this.removal = new JobRemoval(redis, keys, queue, closer, control, ttlS, this.polls);
    this.follows = new JobFollows(redis, reader, admission, {
      submitGenerate: (job, options, id, place) => this.submitGenerate(job, options, id, place),
      cancel: (id) => this.cancel(id),
      expire: (id) => this.removal.expire(id),
    });
  }

  /** Completions followed as they are stored, and any job's events. */
  private readonly follows: JobFollows;

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
          ...(options.owner === "" ? {} : { owner: options.owner }),
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
  submitGenerateFollowing(
    job: GenerateRequest,
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<FollowedJob> {
    return this.follows.one(job, options, signal);
  }

  /**
   * Several completions of one request, on one queue (its choices), enqueued and followed
   * together: admitted all at once or none (QUEUE_FULL), then stored side by side.
   */
  submitGenerateFollowingAll(
    jobs: readonly GenerateRequest[],
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<FollowedJob[]> {
    return this.follows.all(jobs, options, signal);
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
    return this.follows.events(record, after, signal);
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
    const queue = queueName(job.model, job.version);
    if (!admitted) assertReady(this.redis);
    const place = admitted ?? (await this.admission.admit(queue, id, options));
    try {
      return await this.store(id, queue, job, options, build, place);
    } catch (err) {
      // not queued (or not known to be): its place is given back, whatever failed (a count
      // of the queue has it, should its add have landed after all)
      place.withdraw();
      throw err;
    }
  }

  /** Stores an admitted job: its index, its first event, its deadline, its queue entry. */
  private async store(
    id: string,
    queue: string,
    job: Pick<JobIndexEntry, "model" | "version" | "deadline" | "meta">,
    options: EnqueueOptions,
    build: (now: number) => { name: string; data: InferJob | GenerateJob },
    place: AdmittedPlace,
  ): Promise<JobRecord> {
    assertReady(this.redis);
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
    await guarded(async () => {
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
