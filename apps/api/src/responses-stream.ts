import { type CompletionResult, FerryError, type JobEvent } from "@ferry/protocol";
import type { Context } from "hono";
import { errorOf } from "./completion-service.js";
import { openStream } from "./generation-stream.js";
import type { CallOptions } from "./inference-service.js";
import {
  functionCallItem,
  messageItem,
  outputItems,
  outputLogprobs,
  outputText,
  responseObject,
} from "./responses-render.js";
import type { ResponsesRequest } from "./responses-schemas.js";
import type { AppEnv } from "./services.js";
import { sse } from "./sse.js";
import { chatAnswerOf } from "./tool-calls.js";

/**
 * A response streamed as OpenAI streams one: `response.created` and `response.in_progress`,
 * the message and its text part opened, a `response.output_text.delta` per token event (a
 * forced call: the call opened, `response.function_call_arguments.delta`), then each item
 * closed and `response.completed` (or `response.incomplete`) with the whole response; every
 * event named (`event:`) and numbered (`sequence_number`). An answer read whole before it is
 * known for text or calls (`tool_choice: "auto"`) sends its items at the end. Like a chat's
 * stream it waits for the first token before its status line, and names its job in X-Job-Id.
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
  // What streams as it comes: the text, a forced call's arguments, or (a model choosing
  // between text and calls) nothing until the answer is whole and read
  const ask = job.meta.tool_call;
  const live = ask === undefined ? "text" : ask === "named" ? "call" : "none";
  const [forced] = live === "call" ? chatAnswerOf(job.meta, job.id, "").calls : [];
  const at = (item: { id: string }, output_index: number) => ({ item_id: item.id, output_index });
  return sse(c, async (stream) => {
    let sequence = 0;
    const send = (type: string, payload: Record<string, unknown>) =>
      stream.send({
        event: type,
        data: JSON.stringify({ type, sequence_number: sequence++, ...payload }),
      });
    const opening = messageItem(job, "", "in_progress");
    const openCall = forced ? functionCallItem(forced, "in_progress") : undefined;
    type Item = ReturnType<typeof outputItems>[number];
    /** An item's events from where it stands (`opened`: added, its text part too) to its end. */
    const emit = async (item: Item, index: number, opened: boolean) => {
      if (!opened)
        await send("response.output_item.added", { output_index: index, item: emptied(item) });
      if (item.type === "message") {
        const part = item.content[0] ?? outputText("");
        const where = { ...at(item, index), content_index: 0 };
        if (!opened) {
          await send("response.content_part.added", { ...where, part: outputText("") });
          if (part.text)
            await send("response.output_text.delta", {
              ...where,
              delta: part.text,
              logprobs: part.logprobs,
            });
        }
        await send("response.output_text.done", {
          ...where,
          text: part.text,
          logprobs: part.logprobs,
        });
        await send("response.content_part.done", { ...where, part });
      } else {
        if (!opened)
          await send("response.function_call_arguments.delta", {
            ...at(item, index),
            delta: item.arguments,
          });
        await send("response.function_call_arguments.done", {
          ...at(item, index),
          name: item.name,
          arguments: item.arguments,
        });
      }
      await send("response.output_item.done", { output_index: index, item });
    };
    let finished = false;
    const write = async (event: JobEvent) => {
      const e = event.body;
      if (e.type === "token") {
        // (a token that ends inside a character has its log probability, and no text yet)
        if (live === "text" && (e.text || e.logprobs?.length))
          await send("response.output_text.delta", {
            ...at(opening, 0),
            content_index: 0,
            delta: e.text,
            logprobs: outputLogprobs(e.logprobs),
          });
        else if (live === "call" && openCall && e.text)
          await send("response.function_call_arguments.delta", {
            ...at(openCall, 0),
            delta: e.text,
          });
      } else if (e.type === "result") {
        const result = completions.counted(job, e.result as CompletionResult);
        const whole = responseObject({ ...job, status: "succeeded" }, prepared.meta, result);
        for (const [index, item] of outputItems(job, result).entries())
          await emit(
            item,
            index,
            index === 0 &&
              (live === "text"
                ? item.type === "message"
                : live === "call" && item.type === "function_call"),
          );
        await send(`response.${whole.status === "incomplete" ? "incomplete" : "completed"}`, {
          response: whole,
        });
        finished = true;
      } else if (e.type === "error") {
        const error = errorOf(event);
        await send("error", {
          code: error.code.toLowerCase(),
          message: error.message,
          param: null,
        });
        const failed = {
          ...job,
          status: "failed" as const,
          error: { code: error.code, message: error.message },
        };
        await send("response.failed", { response: responseObject(failed, prepared.meta) });
        finished = true;
      }
    };
    try {
      try {
        const started = { ...responseObject(job, prepared.meta), status: "in_progress" };
        await send("response.created", { response: started });
        await send("response.in_progress", { response: started });
        if (live === "text") {
          await send("response.output_item.added", { output_index: 0, item: opening });
          await send("response.content_part.added", {
            ...at(opening, 0),
            content_index: 0,
            part: outputText(""),
          });
        } else if (openCall)
          await send("response.output_item.added", { output_index: 0, item: openCall });
        if (!first.done) await write(first.value);
        for await (const event of events) await write(event);
      } finally {
        close();
      }
      if (!finished && slot.closing.aborted) {
        const resume = `/v1/jobs/${job.id}/events`;
        const error = new FerryError(
          "UNAVAILABLE",
          `This server is shutting down; the response goes on: read it at /v1/responses/${responseObject(job, prepared.meta).id} once done, or follow ${resume}`,
        );
        await send("error", { code: "unavailable", message: error.message, param: null });
      }
    } finally {
      slot.release();
    }
  });
}

/** An item as `output_item.added` shows it: begun, its text or arguments still to come. */
function emptied<T extends { type: string }>(item: T): T {
  if (item.type === "message") return { ...item, status: "in_progress", content: [] };
  return { ...item, status: "in_progress", arguments: "" };
}
