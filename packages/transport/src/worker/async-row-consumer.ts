import {
  type BatchChunkJob,
  type InferJob,
  type InferReply,
  type RowResult,
  WIRE_VERSION,
  type WireError,
} from "@ferry/protocol";
import { type Job, UnrecoverableError } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { type EventWriter, fenceOf } from "../shared/event-log.js";
import { formatFailure } from "../shared/job-records.js";
import { type Keys, queueOfBullName } from "../shared/keys.js";
import { giveBack } from "./give-back.js";
import type { RowContext, RowHandler } from "./handlers.js";

/**
 * Runs a classifier queue's async jobs (BullMQ jobs, `/v1/jobs` and friends; sync rows come
 * through the sync lane): each job's rows through the handler, followed through the job's
 * event log (status, result or error, done) and cancellable while it runs.
 */
export class AsyncRowConsumer {
  constructor(
    private readonly redis: RedisClient,
    private readonly events: EventWriter,
    private readonly keys: Keys,
    /** Running jobs by id, where cancel broadcasts find them. */
    private readonly running: Map<string, AbortController>,
    private readonly workerId: string,
  ) {}

  async process(
    job: Job<InferJob | BatchChunkJob>,
    data: InferJob,
    handler: RowHandler,
    token: string | undefined,
    lockDurationMs: number,
  ): Promise<InferReply> {
    const id = job.id ?? "";
    const ref = { queue: queueOfBullName(job.queueName), id };
    const fence = fenceOf(this.keys, job, token);
    // the log must get its end before the job gets one (see giveBack)
    const logged = () =>
      this.events.flush(ref, fence).catch(() => giveBack(job, token, lockDurationMs));
    const fail = async (error: WireError): Promise<never> => {
      this.events.emit(ref, [{ type: "error", error }, { type: "done" }], fence);
      await logged();
      throw new UnrecoverableError(formatFailure(error));
    };
    // Found by cancel broadcasts from before the mark is read: the broadcast and the mark's
    // answer come on two connections, in no set order, so a cancel made after the read ran
    // may be told first, and would have found no job here to stop.
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      const marked = (await this.redis.exists(this.keys.cancelled(id))) === 1;
      if (marked || controller.signal.aborted)
        return fail({ code: "CANCELLED", message: "job was cancelled" });
      this.events.emit(ref, [{ type: "status", status: "running" }], fence);
      const ctx: RowContext = { jobId: id, signal: controller.signal };
      const results = await Promise.all(data.rows.map((row) => handler(row, data, ctx)));
      if (controller.signal.aborted)
        return fail({ code: "CANCELLED", message: "job was cancelled" });
      // A bad input or a model error fails this job only, and retrying would fail it again.
      const failed = results.find((r) => !r.ok);
      if (failed && !failed.ok) return fail(failed.error);
      const reply = this.reply(id, data, results);
      this.events.emit(ref, [{ type: "result", result: reply }, { type: "done" }], fence);
      await logged();
      return reply;
    } finally {
      if (this.running.get(id) === controller) this.running.delete(id);
    }
  }

  /** Fails a job before its work starts (see Custody): its log says why. */
  async refuse(
    job: Job,
    token: string | undefined,
    lockDurationMs: number,
    message: string,
  ): Promise<never> {
    const ref = { queue: queueOfBullName(job.queueName), id: job.id ?? "" };
    const fence = fenceOf(this.keys, job, token);
    const error: WireError = { code: "MODEL_ERROR", message };
    this.events.emit(ref, [{ type: "error", error }, { type: "done" }], fence);
    await this.events.flush(ref, fence).catch(() => giveBack(job, token, lockDurationMs));
    throw new UnrecoverableError(formatFailure(error));
  }

  private reply(id: string, data: InferJob, results: RowResult[]): InferReply {
    return {
      v: WIRE_VERSION,
      job: id,
      model: data.model,
      version: data.version,
      worker: this.workerId,
      results,
    };
  }
}
