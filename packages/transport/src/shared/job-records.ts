import { isErrorCode, type JobStatus, type WireError } from "@ferry/protocol";

/** What a poll of an async job reports. */
export interface JobRecord {
  id: string;
  model: string;
  version: string;
  status: JobStatus;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  /** The worker's return value once the job succeeded: an InferReply or a CompletionResult. */
  result: unknown;
  error: WireError | null;
  meta: Record<string, unknown>;
  /** The tenant that created the job ("" when the API is open). */
  owner: string;
  /** Epoch ms after which the job must not start; unset on jobs stored before deadlines were. */
  deadline: number | undefined;
  /** How long it is kept once it ends, in s, where less than the deployment's (a sync completion's). */
  keep_s?: number | undefined;
}

/** Stored under Keys.jobQueue: enough to answer a poll even after the job itself is removed. */
export interface JobIndexEntry {
  queue: string;
  model: string;
  version: string;
  created_at: number;
  meta: Record<string, unknown>;
  owner?: string;
  deadline?: number;
  /**
   * How long the job and what marks it (a cancel, an expiry, its log's end) are kept once it
   * ends, in s, where it was queued to be kept less than the deployment's JOB_TTL_S.
   */
  keep_s?: number;
}

/** BullMQ state -> Ferry status; a failure's reason carries its code ("CODE: message"). */
export function jobStatusOf(
  state: string,
  failedReason: string | undefined,
  cancelled: boolean,
): JobStatus {
  if (state === "completed") return "succeeded";
  if (cancelled) return "cancelled";
  if (state === "active") return "running";
  if (state === "failed") {
    const code = parseFailure(failedReason).code;
    if (code === "DEADLINE_EXCEEDED") return "expired";
    if (code === "CANCELLED") return "cancelled";
    return "failed";
  }
  return "queued";
}

export function parseFailure(reason: string | undefined): WireError {
  const match = /^([A-Z_]+): ([\s\S]*)$/.exec(reason ?? "");
  const code = match?.[1];
  if (isErrorCode(code)) return { code, message: match?.[2] ?? "" };
  return { code: "MODEL_ERROR", message: reason ?? "job failed" };
}

export function formatFailure(error: Pick<WireError, "message"> & { code: string }): string {
  return `${error.code}: ${error.message}`;
}

/** A record with only what the index knows (no BullMQ job read). */
export function emptyRecord(
  id: string,
  index: JobIndexEntry,
  status: JobRecord["status"],
): JobRecord {
  return {
    id,
    model: index.model,
    version: index.version,
    status,
    created_at: index.created_at,
    started_at: null,
    finished_at: null,
    result: null,
    error: status === "cancelled" ? { code: "CANCELLED", message: "job was cancelled" } : null,
    meta: index.meta,
    owner: index.owner ?? "",
    deadline: index.deadline,
    keep_s: index.keep_s,
  };
}
