import { FerryError, type JobEvent } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import type { Context } from "hono";
import type { ChatCompletionRequest, CompletionRequest } from "../openai/schemas.js";
import type { HonoEnv } from "../services.js";
import type { CallOptions } from "./call.js";
import { errorOf } from "./errors.js";
import type { StreamSlot } from "./stream-slots.js";

// A generation followed over HTTP, whichever protocol asked for it (OpenAI's streams,
// Responses, Triton's generate_stream): the job comes from `services.completions`.

/** A streamed job whose first output has come, and what ties it to its client and the drain. */
export interface OpenedStream {
  job: JobRecord;
  /** Its first event past status changes (a token, or its result), already read. */
  first: IteratorResult<JobEvent>;
  events: AsyncGenerator<JobEvent>;
  /** Aborted once the client went away or a drain ran out of time: stop reading. */
  reading: AbortSignal;
  /** Unhooks it from its client and the drain, and closes its event log. */
  close(): void;
}

/**
 * Queues a completion and follows it until its first output, tied to the client (one that
 * goes away cancels it) and to the drain (which ends the stream). The status line waits for
 * that first output: a job that expires in the queue or fails before its first token is
 * answered with its HTTP error (504, 503), not a 200 followed by an error event.
 */
export async function openStream(
  c: Context<HonoEnv>,
  body: CompletionRequest | ChatCompletionRequest,
  opts: CallOptions,
  gone: AbortSignal,
  slot: StreamSlot,
  followed: {
    meta?: Record<string, unknown>;
    onJob?: (jobId: string) => void;
    /** False where the caller forgets the job once its stream ends (`store: false`). */
    stored?: boolean;
  } = {},
): Promise<OpenedStream> {
  const { completions } = c.get("services");
  const reading = new AbortController();
  const {
    record: job,
    events,
    close,
  } = await completions.follow(body, opts, reading.signal, followed.meta);
  // the job is known from here, though its stream may still fail before it opens
  followed.onJob?.(job.id);
  // A client that goes away frees its batch slot: the job is cancelled on every worker.
  const onGone = () => {
    reading.abort();
    completions.cancel(job.id);
  };
  if (gone.aborted) onGone();
  gone.addEventListener("abort", onGone);
  // The job behind the stream: /v1/jobs/{id}/events with Last-Event-ID (the chunks' ids)
  // continues it from anywhere, should this connection or this replica go away.
  c.header("X-Job-Id", job.id);
  // A drain that runs out of time ends the stream, even one still waiting for its first
  // token; the client resumes through the job.
  const onClosing = () => reading.abort();
  slot.closing.addEventListener("abort", onClosing);
  const opened = {
    job,
    events,
    reading: reading.signal,
    close: () => {
      gone.removeEventListener("abort", onGone);
      slot.closing.removeEventListener("abort", onClosing);
      close();
    },
  };
  const first = await firstOutput(events);
  if ((!first.done && first.value.body.type === "error") || slot.closing.aborted) {
    opened.close();
    if (!first.done && first.value.body.type === "error") throw errorOf(first.value);
    // a job nobody may read back is cancelled with its stream: there is nothing to follow
    const then =
      followed.stored === false
        ? "it is not stored (store: false), so it was cancelled: send it again"
        : `the job goes on: follow it at /v1/jobs/${job.id}/events`;
    throw new FerryError(
      "UNAVAILABLE",
      `This server is shutting down before job ${job.id} produced its first token; ${then}`,
      { retryAfterS: 1 },
    );
  }
  return { ...opened, first };
}

/** A job's first event past its status changes: its first token, its result or its error. */
export async function firstOutput(
  events: AsyncGenerator<JobEvent>,
): Promise<IteratorResult<JobEvent>> {
  let first = await events.next();
  while (!first.done && first.value.body.type === "status") first = await events.next();
  return first;
}
