import { type CompletionResult, FerryError, type JobEvent } from "@ferry/protocol";
import type { Context } from "hono";
import { errorOf } from "./completion-service.js";
import type { CallOptions } from "./inference-service.js";
import { type StreamRenderer, streamError } from "./openai-render.js";
import type { ChatCompletionRequest, CompletionRequest } from "./schemas.js";
import type { AppEnv } from "./services.js";
import { sse } from "./sse.js";
import type { StreamSlot } from "./stream-slots.js";

/**
 * Answers a completion or chat request with its stream: a slot is taken first (refused
 * before anything is queued), the job is queued and followed, and its events are written as
 * `render` shapes them, ending with `data: [DONE]`. A client that goes away cancels the job;
 * a drain out of time ends the stream with where to resume.
 */
export async function streamGeneration(
  c: Context<AppEnv>,
  body: CompletionRequest | ChatCompletionRequest,
  opts: CallOptions,
  gone: AbortSignal,
  render: StreamRenderer,
): Promise<Response> {
  const slot = c.get("services").streams.acquire(opts.tenant);
  try {
    return await follow(c, body, opts, gone, render, slot);
  } catch (err) {
    slot.release();
    throw err;
  }
}

async function follow(
  c: Context<AppEnv>,
  body: CompletionRequest | ChatCompletionRequest,
  opts: CallOptions,
  gone: AbortSignal,
  render: StreamRenderer,
  slot: StreamSlot,
): Promise<Response> {
  const { completions } = c.get("services");
  const reading = new AbortController();
  const { record: job, events, close } = await completions.follow(body, opts, reading.signal);
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
  // The status line waits for the job's first output: a job that expires in the queue or
  // fails before its first token is answered with its HTTP error (504, 503), not a 200
  // followed by an error chunk.
  let first = await events.next();
  while (!first.done && first.value.body.type === "status") first = await events.next();
  const unanswered = !first.done && first.value.body.type === "error";
  if (unanswered || slot.closing.aborted) {
    gone.removeEventListener("abort", onGone);
    slot.closing.removeEventListener("abort", onClosing);
    close();
    if (!first.done && first.value.body.type === "error") throw errorOf(first.value);
    throw new FerryError(
      "UNAVAILABLE",
      `This server is shutting down before job ${job.id} produced its first token; the job goes on: follow it at /v1/jobs/${job.id}/events`,
      { retryAfterS: 1 },
    );
  }
  const includeUsage = body.stream_options?.include_usage === true;
  let lastId: string | undefined;
  return sse(c, async (stream) => {
    const send = (payload: unknown) =>
      stream.send({ ...(lastId ? { id: lastId } : {}), data: JSON.stringify(payload) });
    const write = async (event: JobEvent) => {
      const e = event.body;
      lastId = event.id;
      if (e.type === "token") await send(render.token(job, e.text));
      else if (e.type === "result")
        for (const chunk of render.end(
          job,
          completions.counted(job, e.result as CompletionResult),
          includeUsage,
        ))
          await send(chunk);
      else if (e.type === "error") await send(streamError(errorOf(event)));
    };
    try {
      for (const chunk of render.start(job)) await send(chunk);
      if (!first.done) await write(first.value);
      for await (const event of events) await write(event);
    } finally {
      gone.removeEventListener("abort", onGone);
      slot.closing.removeEventListener("abort", onClosing);
      close();
    }
    try {
      if (slot.closing.aborted) {
        const resume = `/v1/jobs/${job.id}/events`;
        const message = `This server is shutting down; the completion goes on: resume at ${resume} with Last-Event-ID ${lastId ?? "(none)"}`;
        await send(streamError(new FerryError("UNAVAILABLE", message), { job: job.id, resume }));
      } else if (!reading.signal.aborted) await stream.send({ data: "[DONE]" });
    } finally {
      slot.release();
    }
  });
}

/** Aborted when the client closes its connection before the answer has been written. */
export function clientGone(c: Context<AppEnv>): AbortSignal {
  const controller = new AbortController();
  const res = c.env?.outgoing;
  res?.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}
