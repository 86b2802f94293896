import type { CompletionResult, JobEvent } from "@ferry/protocol";
import type { Context } from "hono";
import { errorOf } from "./completion-service.js";
import { openStream } from "./generation-stream.js";
import type { CallOptions } from "./inference-service.js";
import { type ResponseEvent, ResponseEvents } from "./responses-events.js";
import { responseObject } from "./responses-render.js";
import type { ResponsesRequest } from "./responses-schemas.js";
import type { AppEnv } from "./services.js";
import { sse } from "./sse.js";

/**
 * A response streamed as OpenAI streams one (`ResponseEvents` shapes the events): every event
 * named (`event:`) and numbered (`sequence_number`). Like a chat's stream it waits for the
 * first token before its status line, names its job in X-Job-Id, and a drain out of time ends
 * it with where to read the rest.
 */
export async function streamResponse(
  c: Context<AppEnv>,
  body: ResponsesRequest,
  opts: CallOptions,
  gone: AbortSignal,
): Promise<Response> {
  const { responses, streams, completions } = c.get("services");
  const prepared = await responses.prepare(body, opts.tenant);
  const slot = streams.acquire(opts.tenant);
  let opened: Awaited<ReturnType<typeof openStream>>;
  try {
    opened = await openStream(c, prepared.chat, opts, gone, slot, { responses: prepared.meta });
  } catch (err) {
    slot.release();
    throw err;
  }
  const { job, first, events, close } = opened;
  const shaped = new ResponseEvents(job, prepared.meta);
  return sse(c, async (stream) => {
    let sequence = 0;
    const send = async (batch: ResponseEvent[]) => {
      for (const { type, ...payload } of batch)
        await stream.send({
          event: type,
          data: JSON.stringify({ type, sequence_number: sequence++, ...payload }),
        });
    };
    let finished = false;
    const write = async (event: JobEvent) => {
      const e = event.body;
      if (e.type === "token") await send(shaped.token(e));
      else if (e.type === "result") {
        await send(shaped.result(completions.counted(job, e.result as CompletionResult)));
        finished = true;
      } else if (e.type === "error") {
        await send(shaped.error(errorOf(event)));
        finished = true;
      }
    };
    try {
      try {
        await send(shaped.start());
        if (!first.done) await write(first.value);
        for await (const event of events) await write(event);
      } finally {
        close();
      }
      if (!finished && slot.closing.aborted) {
        const id = responseObject(job, prepared.meta).id;
        const message = `This server is shutting down; the response goes on: read it at /v1/responses/${id} once done, or follow /v1/jobs/${job.id}/events`;
        await send([{ type: "error", code: "unavailable", message, param: null }]);
      }
    } finally {
      slot.release();
    }
  });
}
