import {
  type CompletionResult,
  type GenerateJob,
  type InferJob,
  type InferReply,
  isResultInLog,
  withoutFlag,
} from "@ferry/protocol";
import { Job, type Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { parseEntry } from "../shared/event-log.js";
import {
  emptyRecord,
  type JobIndexEntry,
  type JobRecord,
  jobStatusOf,
  parseFailure,
} from "../shared/job-records.js";
import type { JobRef, Keys } from "../shared/keys.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import { EXPIRED_MARK, NOT_COMPUTED, WAITING_STATES } from "./job-removal.js";

/**
 * A job's state as a poll reads it, from its index, BullMQ's record of it and the end of its
 * log (whichever of them is still there), the reading side of `JobClient`.
 */
export class JobPolls {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    /** Expires a job still waiting past its deadline (`JobRemoval.expire`). */
    private readonly expire: (id: string) => Promise<boolean>,
  ) {}

  /** Where a job is queued (its index entry); undefined when the id is unknown. */
  async index(id: string): Promise<JobIndexEntry | undefined> {
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
      // Removed while queued by a cancel or at its deadline; or kept its time once ended and
      // removed by BullMQ (the index outlives it by the slack its deadline gave it); or lost
      // between writing the index and the job.
      if (cancelled === EXPIRED_MARK)
        return {
          ...emptyRecord(id, index, "expired"),
          error: { code: "DEADLINE_EXCEEDED", message: NOT_COMPUTED },
        };
      if (cancelled) return emptyRecord(id, index, "cancelled");
      const ref = { queue: index.queue, id };
      const ended = await this.endOfLog(ref);
      if (ended) return { ...emptyRecord(id, index, ended.status), ...ended };
      // nothing of it left but its index: it expired (a succeeded job had read "failed")
      if ((await guarded(() => this.redis.exists(this.keys.events(ref)))) === 0) return undefined;
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
    // a completion's result is its log's (ResultInLog): BullMQ's copy lacks its logprobs, and
    // is what is left if the log went first
    const result =
      status !== "succeeded"
        ? null
        : isResultInLog(job.returnvalue)
          ? ((await this.endOfLog({ queue: index.queue, id }))?.result ??
            withoutFlag(job.returnvalue))
          : (job.returnvalue ?? null);
    return {
      ...record,
      started_at: job.processedOn ?? null,
      finished_at: job.finishedOn ?? null,
      result,
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
}
