import type { JobRecord } from "@ferry/transport";
import type { z } from "@hono/zod-openapi";
import type { CallOptions } from "../http/call.js";
import type { Plan } from "../inference/inference-service.js";
import type { jobBodySchema } from "./schemas.js";

export type JobBody = z.infer<typeof jobBodySchema>;

/**
 * What a job of one protocol's shape needs: rows to queue as a classifier job (the job
 * service queues them), or a job the protocol's own service has already queued.
 */
export type JobSubmission = JobRows | { queued: Promise<JobRecord> };

/** A classifier job's rows, and what its result is rendered with (`meta.format` names the kind). */
export interface JobRows {
  plan: Plan;
  meta: { format: string } & Record<string, unknown>;
}

/**
 * One protocol's body inside `POST /v1/jobs`: each protocol folder supplies its own (predict,
 * v2 infer, completions), handed to the job service at boot, so that a job answers exactly as
 * that protocol's sync route would without the jobs folder knowing any protocol.
 */
export interface JobKind {
  /** The body's shape, for the error that no kind took it ("a predict body {features}"). */
  readonly shape: string;
  /** The formats (`meta.format`) of the jobs it makes, for rendering them back. */
  readonly formats: readonly string[];
  /** Whether result events go to clients as the worker sent them rather than rendered. */
  readonly rawResultEvents?: boolean;
  /** The job for `body`, or undefined when its input is not this kind's shape. */
  accept(body: JobBody, opts: CallOptions): JobSubmission | undefined;
  /** A finished job's result as the sync route would have answered. */
  render(record: JobRecord): unknown;
}
