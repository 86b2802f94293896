import { randomUUID } from "node:crypto";
import { type JobEvent, queueName } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { JobRecord } from "../shared/job-records.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import type { EventReader } from "./event-reader.js";
import type { AdmittedPlace, JobAdmission } from "./job-admission.js";
import type { EnqueueOptions, GenerateRequest } from "./job-requests.js";

/** A job being followed as it is enqueued: its record, its events, and how to stop reading. */
export interface FollowedJob {
  record: JobRecord;
  events: AsyncGenerator<JobEvent>;
  close: () => void;
}

/** What following jobs needs of the client that stores and removes them. */
export interface FollowedJobs {
  /** Stores a completion as job `id` (admitted already when `place` is given). */
  submitGenerate(
    job: GenerateRequest,
    options: EnqueueOptions,
    id: string,
    place?: AdmittedPlace,
  ): Promise<JobRecord>;
  cancel(id: string): Promise<unknown>;
  /** Removes a job still queued at its deadline, its log ended DEADLINE_EXCEEDED. */
  expire(id: string): Promise<unknown>;
}

/**
 * Completions followed as they are stored (one, or a request's several choices together), and
 * any job's events, each stream held to its job's deadline.
 */
export class JobFollows {
  constructor(
    private readonly redis: RedisClient,
    private readonly reader: EventReader,
    private readonly admission: JobAdmission,
    private readonly jobs: FollowedJobs,
  ) {}

  /**
   * Enqueues a completion and follows its events: the subscription is made while the job is
   * stored, not after, which takes a round trip off the time to the first token.
   */
  async one(job: GenerateRequest, options: EnqueueOptions, signal?: AbortSignal) {
    assertReady(this.redis);
    return this.whileStored(job, options, randomUUID(), undefined, signal);
  }

  /**
   * A request's several completions on one queue (its choices): admitted all at once or none
   * (QUEUE_FULL), then stored side by side. If any fails, every one is cancelled (a choice may
   * fail after its job was stored: its reader's open, the replicas' wait), and the request
   * fails: none runs on with nobody to read it.
   */
  async all(
    jobs: readonly GenerateRequest[],
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<FollowedJob[]> {
    assertReady(this.redis);
    const [first] = jobs;
    if (!first) return [];
    const queue = queueName(first.model, first.version);
    if (jobs.some((job) => queueName(job.model, job.version) !== queue))
      throw new Error("JobFollows.all: the jobs of one call share a queue");
    const ids = jobs.map(() => randomUUID());
    const places = await this.admission.admitAll(queue, ids, options);
    const settled = await Promise.allSettled(
      jobs.map((job, k) => this.whileStored(job, options, ids[k] as string, places[k], signal)),
    );
    const failed = settled.find((one) => one.status === "rejected");
    const followed = settled.flatMap((one) => (one.status === "fulfilled" ? [one.value] : []));
    if (!failed) return followed;
    for (const one of followed) one.close();
    await Promise.all(ids.map((id) => this.jobs.cancel(id).catch(() => undefined)));
    throw failed.reason;
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
   * Opens job `id`'s events while it is stored (admitted already when `place` is given). A job
   * stored whose events could not be opened is cancelled: nobody would read it.
   */
  private async whileStored(
    job: GenerateRequest,
    options: EnqueueOptions,
    id: string,
    place: AdmittedPlace | undefined,
    signal?: AbortSignal,
  ): Promise<FollowedJob> {
    const queue = queueName(job.model, job.version);
    const [follow, record] = await Promise.allSettled([
      guarded(() => this.reader.open({ queue, id })),
      this.jobs.submitGenerate(job, options, id, place),
    ]);
    if (record.status === "rejected") {
      if (follow.status === "fulfilled") follow.value.close();
      throw record.reason;
    }
    if (follow.status === "rejected") {
      await this.jobs.cancel(id).catch(() => undefined);
      throw follow.reason;
    }
    return {
      record: record.value,
      events: this.untilDeadline(id, job.deadline, follow.value.events(undefined, signal)),
      close: follow.value.close,
    };
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
        if (!started) void this.jobs.expire(id).catch(() => undefined);
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
}
