import {
  type CompletionResult,
  FerryError,
  type GenerateJob,
  type JobEventBody,
  priorityOfBull,
  type ResultInLog,
  type ResumePoint,
  resultInLog,
  WIRE_VERSION,
} from "@ferry/protocol";
import { type Job, UnrecoverableError } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { type EventWriter, fenceOf, type WriteFence } from "../shared/event-log.js";
import { formatFailure } from "../shared/job-records.js";
import { type JobRef, type Keys, queueOfBullName } from "../shared/keys.js";
import { giveBack } from "./give-back.js";
import type { GenerateHandler } from "./handlers.js";

/**
 * Runs generator jobs: one completion each, whose events (status, tokens, result or error,
 * done) go to the job's log as the handler emits them. A job that stalled over from another
 * worker resumes after the tokens that worker already logged; a worker that lost a job's lock
 * has its writes refused and stops computing it.
 */
export class GenerationConsumer {
  /** Generations by their attempt (a job can come back to the same worker, under its token). */
  private readonly attempts = new Map<string, AbortController>();

  /**
   * @param redis the event writer's connection (not BullMQ's: see WorkerTransport)
   * @param running running jobs by id, where cancel broadcasts find them
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly events: EventWriter,
    private readonly keys: Keys,
    private readonly running: Map<string, AbortController>,
  ) {
    // a job that stalled over to another worker: stop computing what nobody will see
    events.onFenceLost((fence) => this.attempts.get(fence.attempt)?.abort());
  }

  /** Runs one job under the lock `token`, which lapses `lockDurationMs` after its last renewal. */
  async process(
    job: Job<GenerateJob, CompletionResult | ResultInLog>,
    handler: GenerateHandler,
    token: string | undefined,
    lockDurationMs: number,
  ): Promise<CompletionResult | ResultInLog> {
    const id = job.id ?? "";
    const attempt: Attempt = {
      job,
      token,
      lockDurationMs,
      ref: { queue: queueOfBullName(job.queueName), id },
      // Writes carry our lock: if the job stalls over to another worker, ours stop landing.
      fence: fenceOf(this.keys, job, token),
    };
    const emit = (events: JobEventBody[]) =>
      this.events.emit(attempt.ref, events, attempt.fence, keepOf(job));
    if (job.data.v !== WIRE_VERSION || job.data.kind !== "generate") {
      return this.fail(attempt, new FerryError("INVALID_INPUT", "unsupported message"));
    }
    const controller = new AbortController();
    const cancelled = this.redis.exists(this.keys.cancelled(id));
    // Only a job that was active before (it stalled over from a worker that died or lost its
    // lock, or was given back) can have a log to answer from or resume after; a fresh one
    // starts at once, its first token not waiting on a round trip, and a cancel flag found
    // meanwhile stops it.
    const fresh = job.attemptsStarted <= 1 && job.stalledCounter === 0;
    // where cancel broadcasts find it before the flag is read, as WorkerTransport's async jobs
    // are (a broadcast may come before the read's answer)
    this.running.set(id, controller);
    if (attempt.fence) this.attempts.set(attempt.fence.attempt, controller);
    try {
      const resume: ResumePoint = { ids: [], logprobs: [] };
      if (fresh) {
        cancelled.then(
          (n) => n === 1 && controller.abort(),
          () => undefined,
        );
      } else {
        const [flag, logged] = await Promise.all([cancelled, this.events.history(attempt.ref)]);
        if (flag === 1 || controller.signal.aborted)
          return this.fail(attempt, new FerryError("CANCELLED", "job was cancelled"));
        const ended = logged.find((e) => e.type === "result" || e.type === "error");
        // the earlier attempt finished and wrote its answer, but lost its lock before completing
        if (ended?.type === "result") return resultInLog(ended.result as CompletionResult);
        if (ended?.type === "error") throw new UnrecoverableError(formatFailure(ended.error));
        const tokens = logged.flatMap((e) => (e.type === "token" ? [e] : []));
        resume.ids = tokens.flatMap((e) => e.ids ?? []);
        resume.logprobs = tokens.flatMap((e) => e.logprobs ?? []);
      }
      if (resume.ids.length === 0) emit([{ type: "status", status: "running" }]);
      const run = Math.max(1, job.attemptsStarted, job.stalledCounter + 1);
      const ctx = {
        jobId: id,
        signal: controller.signal,
        emit,
        resume,
        attempt: run,
        priority: priorityOfBull(job.priority),
      };
      try {
        const result = await handler(job.data, ctx);
        emit([{ type: "result", result }, { type: "done" }]);
        await this.events.flush(attempt.ref, attempt.fence);
        return resultInLog(result);
      } catch (err) {
        if (this.events.gaveUp(attempt.ref, attempt.fence))
          return giveBack(attempt.job, attempt.token, attempt.lockDurationMs);
        const error = err instanceof FerryError ? err : new FerryError("MODEL_ERROR", String(err));
        return this.fail(attempt, error);
      }
    } finally {
      if (this.running.get(id) === controller) this.running.delete(id);
      if (attempt.fence) this.attempts.delete(attempt.fence.attempt);
    }
  }

  /** Fails a job before its work starts (see Custody): its log says why. */
  async refuse(
    job: Job<GenerateJob, CompletionResult | ResultInLog>,
    token: string | undefined,
    lockDurationMs: number,
    error: FerryError,
  ): Promise<never> {
    const ref = { queue: queueOfBullName(job.queueName), id: job.id ?? "" };
    const attempt = { job, token, lockDurationMs, ref, fence: fenceOf(this.keys, job, token) };
    return this.fail(attempt, error);
  }

  /** Closes the job's log with its error and fails the job without retries. */
  private async fail(attempt: Attempt, error: FerryError): Promise<never> {
    const wire = { code: error.code, message: error.message };
    this.events.emit(
      attempt.ref,
      [{ type: "error", error: wire }, { type: "done" }],
      attempt.fence,
      keepOf(attempt.job),
    );
    try {
      await this.events.flush(attempt.ref, attempt.fence);
    } catch {
      return giveBack(attempt.job, attempt.token, attempt.lockDurationMs);
    }
    throw new UnrecoverableError(formatFailure(wire));
  }
}

/** One attempt at a job: the lock it runs under, and the fence its event writes carry. */
interface Attempt {
  job: Job;
  token: string | undefined;
  lockDurationMs: number;
  ref: JobRef;
  fence: WriteFence | undefined;
}

/** How long a generate job's log is kept (its own `keep_s`; the writer's TTL otherwise). */
function keepOf(job: Job): number | undefined {
  const keep = (job.data as Partial<GenerateJob> | undefined)?.keep_s;
  return typeof keep === "number" && keep > 0 ? keep : undefined;
}
