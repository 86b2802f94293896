import { randomUUID } from "node:crypto";
import {
  bullPriority,
  type CancelMessage,
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
import type { Redis } from "ioredis";
import type { EventWriter } from "./event-log.js";
import type { EventReader } from "./event-reader.js";
import {
  emptyRecord,
  type JobIndexEntry,
  type JobRecord,
  parseFailure,
  statusOf,
} from "./job-records.js";
import type { Keys } from "./keys.js";
import type { QueueDepth } from "./queue-depth.js";
import { assertReady, guarded } from "./redis-guard.js";

export interface AsyncJobRequest {
  model: string;
  version: string;
  rows: RowInputs[];
  /** Epoch ms after which the rows must not be computed. */
  deadline: number;
  /** 1 (lowest) to 10 (highest). */
  priority: number;
  maxQueueSize: number;
  /** Opaque to workers: what the API needs to render the result when polled. */
  meta: Record<string, unknown>;
}

/**
 * Async jobs: one BullMQ job each, that can be polled, followed (events), cancelled, and
 * outlives the API process that took it. An index key maps the public id to its queue.
 */
export class JobClient {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    private readonly depth: QueueDepth,
    private readonly writer: EventWriter,
    private readonly reader: EventReader,
    private readonly ttlS: number,
  ) {}

  /** Enqueues classifier rows as one job. */
  async submit(req: AsyncJobRequest): Promise<JobRecord> {
    const id = randomUUID();
    return this.enqueue(
      id,
      req.model,
      req.version,
      req.priority,
      req.maxQueueSize,
      req.meta,
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
    job: Omit<GenerateJob, "v" | "kind" | "accepted_at">,
    priority: number,
    maxQueueSize: number,
    id: string = randomUUID(),
  ): Promise<JobRecord> {
    return this.enqueue(
      id,
      job.model,
      job.version,
      priority,
      maxQueueSize,
      job.meta ?? {},
      (now) => {
        // a reader that connects before any worker takes the job sees it queued
        this.writer.emit(id, [{ type: "status", status: "queued" }]);
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
    job: Omit<GenerateJob, "v" | "kind" | "accepted_at">,
    priority: number,
    maxQueueSize: number,
    signal?: AbortSignal,
  ): Promise<{ record: JobRecord; events: AsyncGenerator<JobEvent>; close: () => void }> {
    assertReady(this.redis);
    const id = randomUUID();
    const [follow, record] = await Promise.allSettled([
      guarded(() => this.reader.open(id)),
      this.submitGenerate(job, priority, maxQueueSize, id),
    ]);
    if (record.status === "rejected") {
      if (follow.status === "fulfilled") follow.value.close();
      throw record.reason;
    }
    if (follow.status === "rejected") throw follow.reason;
    return {
      record: record.value,
      events: follow.value.events(undefined, signal),
      close: follow.value.close,
    };
  }

  /** A job's events after `after` (a stream id), live until its `done` event. */
  events(jobId: string, after: string | undefined, signal?: AbortSignal): AsyncGenerator<JobEvent> {
    assertReady(this.redis);
    return this.reader.read(jobId, after, signal);
  }

  /** The job's state as a poll reports it; undefined when the id is unknown or expired. */
  async get(id: string): Promise<JobRecord | undefined> {
    assertReady(this.redis);
    const [rawIndex, cancelled] = await guarded(() =>
      this.redis.mget(this.keys.jobQueue(id), this.keys.cancelled(id)),
    );
    if (!rawIndex) return undefined;
    const index = JSON.parse(rawIndex) as JobIndexEntry;
    const job = await guarded(() =>
      Job.fromId<InferJob | GenerateJob, InferReply | CompletionResult>(
        this.queue(index.queue),
        id,
      ),
    );
    if (!job) {
      // Removed while queued by a cancel, or lost between writing the index and the job.
      if (cancelled) return emptyRecord(id, index, "cancelled");
      return {
        ...emptyRecord(id, index, "failed"),
        error: { code: "UNAVAILABLE", message: "job was not stored" },
      };
    }
    const state = await guarded(() => job.getState());
    const status = statusOf(state, job.failedReason, cancelled !== null);
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
    const message: CancelMessage = { v: WIRE_VERSION, job: id };
    await guarded(() =>
      this.redis
        .multi()
        .set(this.keys.cancelled(id), "1", "EX", this.ttlS)
        .publish(this.keys.cancelChannel, JSON.stringify(message))
        .exec(),
    );
    const index = await this.redis.get(this.keys.jobQueue(id));
    if (index) {
      const job = await Job.fromId(this.queue((JSON.parse(index) as JobIndexEntry).queue), id);
      // An active job holds a lock and cannot be removed; its worker drops it on the broadcast.
      const removed = await job?.remove().then(
        () => true,
        () => false,
      );
      if (removed) {
        // nobody will run it now, so nobody else will close its event log
        this.writer.emit(id, [
          { type: "error", error: { code: "CANCELLED", message: "job was cancelled" } },
          { type: "done" },
        ]);
        await this.writer.flush();
      }
    }
    return this.get(id);
  }

  private async enqueue(
    id: string,
    model: string,
    version: string,
    priority: number,
    maxQueueSize: number,
    meta: Record<string, unknown>,
    build: (now: number) => { name: string; data: InferJob | GenerateJob },
  ): Promise<JobRecord> {
    assertReady(this.redis);
    const queue = queueName(model, version);
    await this.depth.admit(queue, maxQueueSize);
    const now = Date.now();
    const index: JobIndexEntry = { queue, model, version, created_at: now, meta };
    await guarded(async () => {
      const { name, data } = build(now);
      // One round trip, not three: one connection runs commands in the order they were sent,
      // so the index and the first event are stored before any worker can see the job.
      await Promise.all([
        this.redis.set(this.keys.jobQueue(id), JSON.stringify(index), "EX", this.ttlS),
        this.writer.flush(),
        this.queue(queue).add(name, data, {
          jobId: id,
          priority: bullPriority(priority),
          removeOnComplete: { age: this.ttlS },
          removeOnFail: { age: this.ttlS },
        }),
      ]);
    });
    return emptyRecord(id, index, "queued");
  }
}
