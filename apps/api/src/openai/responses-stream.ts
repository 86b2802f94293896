import type { CompletionResult, JobEvent } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import type { Context } from "hono";
import type { CallOptions } from "../http/call.js";
import { openStream } from "../http/job-stream.js";
import { type SseStream, sse, tieResumable } from "../http/sse.js";
import type { HonoEnv } from "../services.js";
import { type ResponseEvent, ResponseEvents } from "./responses-events.js";
import { type ResponsesMeta, responseObject } from "./responses-render.js";
import type { ResponsesRequest } from "./responses-schemas.js";
import { jobMeta } from "./responses-service.js";

/**
 * A response streamed as OpenAI streams one (`ResponseEvents` shapes the events): every event
 * named (`event:`) and numbered (`sequence_number`). Like a chat's stream it waits for the
 * first token before its status line, names its job in X-Job-Id, and a drain out of time ends
 * it with where to read the rest.
 */
export async function streamResponse(
  c: Context<HonoEnv>,
  body: ResponsesRequest,
  opts: CallOptions,
  gone: AbortSignal,
): Promise<Response> {
  const { responses, streams, completions } = c.get("services");
  const prepared = await responses.prepare(body, opts.tenant);
  const slot = streams.acquire(opts.tenant);
  let opened: Awaited<ReturnType<typeof openStream>>;
  let queued: string | undefined;
  try {
    // a stored response is read back and continued for as long as jobs are kept
    const kept = { ...opts, kept: prepared.meta.echo.store };
    opened = await openStream(c, prepared.chat, kept, gone, slot, {
      meta: jobMeta(prepared),
      onJob: (id) => {
        queued = id;
      },
      stored: prepared.meta.echo.store,
    });
  } catch (err) {
    slot.release();
    // failed before its first token (a deadline, the job's error, a drain): a `store: false`
    // response leaves nothing behind, as once answered; the refusal does not wait for it
    if (queued !== undefined) void responses.forget(prepared, queued);
    throw err;
  }
  const { job, first, events, close } = opened;
  const shaped = new ResponseEvents(job, prepared.meta);
  return sse(c, async (stream) => {
    const send = numbered(stream);
    const write = (event: JobEvent) => {
      if (event.body.type === "result")
        completions.countTokens(job, event.body.result as CompletionResult);
      return send(shaped.next(event));
    };
    try {
      try {
        await send(shaped.start());
        if (!first.done) await write(first.value);
        for await (const event of events) await write(event);
      } finally {
        close();
      }
      if (!shaped.ended && slot.closing.aborted) {
        const id = responseObject(job, prepared.meta).id;
        // a response not stored is forgotten below, its job cancelled: nothing goes on
        const message = prepared.meta.echo.store
          ? `This server is shutting down; the response goes on: read it at /v1/responses/${id} once done, or follow /v1/jobs/${job.id}/events`
          : "This server is shutting down; the response is not stored (store: false), so it was cancelled: send it again";
        await send([{ type: "error", code: "unavailable", message, param: null }]);
      }
    } finally {
      slot.release();
      // the stream ends now, its job forgotten after (`forget`: a drain that had waited for
      // it here exited under the stream, cut off before its end)
      void responses.forget(prepared, job.id);
    }
  });
}

/**
 * Writes Responses events, each named (`event:`) and numbered (`sequence_number`) in order
 * from 0; those numbered `startingAfter` or less are left out (a client resuming).
 */
function numbered(stream: SseStream, startingAfter = -1) {
  let next = 0;
  const send = async (batch: ResponseEvent[]) => {
    for (const { type, ...payload } of batch) {
      const number = next++;
      if (number <= startingAfter) continue;
      await stream.send({
        event: type,
        data: JSON.stringify({ type, sequence_number: number, ...payload }),
      });
    }
  };
  /** The number of the last event sent, or passed over; -1 before any. */
  send.last = () => Math.max(next - 1, startingAfter);
  return send;
}

/**
 * A background response's stream, from its job's event log (what nothing loses): the events
 * are the same, numbered the same, every time the log is read, so a client that lost its
 * stream reads it again from `starting_after` (OpenAI's resume) and misses nothing. Its
 * client going away does not cancel it; a draining replica ends the stream at once, saying
 * where to resume. `open` queues the response or finds it, once a stream slot is taken (a
 * refused stream queues nothing).
 */
export async function streamStoredResponse(
  c: Context<HonoEnv>,
  open: () => Promise<{ job: JobRecord; meta: ResponsesMeta }>,
  startingAfter = -1,
): Promise<Response> {
  const { jobs, streams, drainSignal } = c.get("services");
  const tenant = c.get("tenant");
  const slot = streams.acquire(tenant);
  const reading = new AbortController();
  let job: JobRecord;
  let meta: ResponsesMeta;
  let events: Awaited<ReturnType<typeof jobs.events>>;
  try {
    ({ job, meta } = await open());
    events = await jobs.events(job.id, tenant, undefined, reading.signal);
  } catch (err) {
    slot.release();
    throw err;
  }
  const shaped = new ResponseEvents(job, meta, true);
  return sse(c, async (stream) => {
    const untie = tieResumable(stream, drainSignal, reading);
    const send = numbered(stream, startingAfter);
    try {
      await send(shaped.start());
      for await (const event of events) await send(shaped.next(event));
      if (!shaped.ended && drainSignal.aborted) {
        const id = responseObject(job, meta).id;
        const last = send.last();
        const resume = last < 0 ? "" : `&starting_after=${last}`;
        const message = `This server is shutting down; the response goes on: stream it again at /v1/responses/${id}?stream=true${resume}`;
        // (not one of the response's events: numbered, it would collide with one on resume)
        await stream.send({
          event: "error",
          data: JSON.stringify({ type: "error", code: "unavailable", message, param: null }),
        });
      }
    } finally {
      untie();
      slot.release();
    }
  });
}
