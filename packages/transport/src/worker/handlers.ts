// What a worker plugs into its transport: the handlers that serve rows and completions, and
// what each is given. Types only, so that the consumers and the transport share them without
// importing one another.
import type {
  CompletionResult,
  GenerateJob,
  InferJob,
  InferRow,
  JobEventBody,
  ReloadOutcome,
  ResumePoint,
  RowResult,
} from "@ferry/protocol";

export interface ConsumeOptions {
  /** Jobs one queue runs at once; enough to fill every instance's batch. */
  concurrency: number;
  /**
   * How long a job's lock lives without renewal, in ms. A worker that dies loses its jobs to
   * another after about this long. @defaultValue 10_000
   */
  lockDurationMs?: number;
  /** How often workers look for jobs whose lock lapsed, in ms. @defaultValue 5_000 */
  stalledIntervalMs?: number;
  /**
   * A generator's: interactive jobs it may run past `concurrency` while offline batches' lines
   * hold every slot (see InteractiveReserve). @defaultValue 0
   */
  interactiveReserve?: number;
  /**
   * How often the reserve looks at the queue's head while every slot is held, in ms: an
   * interactive completion an API announced is fetched at once, this only catches what the
   * announcement missed. @defaultValue 25
   */
  interactivePeekMs?: number;
}

export interface RowContext {
  jobId: string;
  /** Aborted when a cancel for this job is broadcast. */
  signal: AbortSignal;
}

export interface GenerateContext extends RowContext {
  /** Appends events to the job's log (written once per event-loop turn). */
  emit: (events: JobEventBody[]) => void;
  /**
   * What an earlier attempt already sent to the log (this job stalled over from a worker that
   * died or lost its link): continue after its tokens rather than send their text twice.
   */
  resume: ResumePoint;
  /** 1 for a job's first run; more once it was taken over from a worker that died. */
  attempt: number;
  /** Its request's priority, 1 (lowest: offline batches' lines) to 10. */
  priority: number;
}

export type GenerateHandler = (job: GenerateJob, ctx: GenerateContext) => Promise<CompletionResult>;

export type RowHandler = (row: InferRow, job: InferJob, ctx: RowContext) => Promise<RowResult>;

/** An offline chunk's rows for one model input, back to back as ingestion packed them. */
/** What a row of a cancelled batch that never ran is answered (code `CANCELLED`). */
export const NOT_RUN = "not run: its batch was cancelled";

export interface PackedRows {
  input: string;
  rows: Buffer;
  count: number;
  /**
   * True once the chunk's batch no longer wants it (cancelled): batches not yet run are not
   * run, their rows answered `CANCELLED`.
   */
  stopped?: () => boolean;
}

/** Each row's first output, packed likewise (count x width FP32), and the rows that failed. */
export interface PackedOutputs {
  width: number;
  values: Float32Array;
  errors: Record<number, { code: string; message: string }>;
}

/** Runs an offline chunk's packed rows through the version that serves its queue. */
export type PackedHandler = (rows: PackedRows) => Promise<PackedOutputs>;

/** A worker's side of a reload; an outcome is this worker's answer to the request. */
export interface ReloadHandler {
  /** Loads what changed of `model` from the repository and swaps it in at once. */
  reload(model: string): Promise<Omit<ReloadOutcome, "worker">>;
  /** Loads what changed of `model` and holds it under `id` until `decide`. */
  prepare(model: string, id: string): Promise<Omit<ReloadOutcome, "worker">>;
  /**
   * Swaps in (`commit`) or drops what `prepare` holds under `id`; false if it held nothing
   * (the decision came after the hold expired, or to another worker's reload).
   */
  decide(id: string, commit: boolean): Promise<boolean>;
}
