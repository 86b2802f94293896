import type { TraceCarrier } from "@ferry/telemetry";
import type { ServerTiming } from "./server-timing.js";
import type { Tenant } from "./tenant.js";

export interface CallOptions {
  requestId: string;
  /** Whose request this is: owner of what it creates, and the scope of what it may see. */
  tenant: Tenant;
  /** 1..10; header X-Priority or the body's priority. */
  priority?: number | undefined;
  /** Deadline from the request's arrival, in ms; defaults to the model's default_timeout_ms. */
  timeoutMs?: number | undefined;
  /** Time the request already spent in this process before the call, in ms (of `timeoutMs`). */
  waitedMs?: number | undefined;
  /** false skips the prediction cache for this request (`Cache-Control: no-cache`). */
  cache?: boolean | undefined;
  /** Gives back the place admission held for this request before its body was read. */
  releaseAdmission?: (() => void) | undefined;
  /**
   * A completion followed to its end that is kept as long as async jobs once done (a stored
   * response, read back and continued), not only for resuming its stream.
   */
  kept?: boolean | undefined;
  /**
   * The version a completion runs on, where its route names one (an async job's `version`,
   * Triton's `/versions/{v}/generate`); unnamed, the model's default.
   */
  version?: string | undefined;
  /**
   * The id what the call creates takes (a job, a batch): derived from its Idempotency-Key, so
   * that a retry after its API replica died finds what the first attempt made.
   */
  createdId?: string | undefined;
  /**
   * The request's trace context (its server span's), carried with the work it queues so the
   * worker's spans join its trace; absent when tracing is off. Handed down explicitly rather
   * than through AsyncLocalStorage, whose promise hooks cost Node 20 a third of the API's
   * throughput (measured: `npm run bench -- tracing`).
   */
  trace?: TraceCarrier | undefined;
  /**
   * How long a completion followed to its end keeps its job and event log for a reader that
   * comes back, in s, where not as long as any sync call's (a batch line's: its runner read
   * it once, and no client resumes it; an hour of each line's log was most of what a batch
   * of many-choice lines kept in Redis).
   */
  keepForS?: number | undefined;
  /**
   * Its events are streamed later though the request is not (a background response, read back
   * as Responses events): its log-probability budget counts a streamed token's chunk.
   */
  streamedLater?: boolean | undefined;
  /**
   * A batch line's: a choice of several refused by a full queue (its key's share) waits and is
   * sent again, the choices queued before it kept, rather than failing the call, which the
   * line would then run again whole (the choices that had run thrown away, their event logs
   * kept an hour: one 8 KB file of 24-choice lines put 2 GB in Redis).
   */
  waitsOutFullQueues?: boolean | undefined;
  /** Where the answer's time went, for its Server-Timing header (filled by the services). */
  timing?: ServerTiming | undefined;
  /**
   * The ids of the jobs a synchronous answer ran, for its X-Job-Id header (filled by the
   * services): a completion's job and log outlive its request for SYNC_JOB_TTL_S, and this is
   * how a caller with only the answer (Triton's generate carries no id of Ferry's) finds it.
   */
  jobs?: string[] | undefined;
}
