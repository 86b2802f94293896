import type { GenerateJob, RowInputs, TraceCarrierWire } from "@ferry/protocol";

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

/** A completion as the API hands it over; the transport adds the wire fields. */
export type GenerateRequest = Omit<GenerateJob, "v" | "kind" | "accepted_at">;
