import { type CompletionResult, FerryError, type JobEvent } from "@ferry/protocol";
import type { Context } from "hono";
import type { CallOptions } from "../http/call.js";
import { errorOf } from "../http/errors.js";
import { firstOutput, openStream } from "../http/job-stream.js";
import { sse } from "../http/sse.js";
import type { StreamSlot } from "../http/stream-slots.js";
import type { HonoEnv } from "../services.js";
import { continuousUsage, sumUsage } from "./choices.js";
import type { FollowedCompletion } from "./completion-service.js";
import {
  ChoiceState,
  type StreamChunk,
  type StreamRenderer,
  streamError,
} from "./openai-render.js";
import type { ChatCompletionRequest, CompletionRequest } from "./schemas.js";

/**
 * Answers a completion or chat request with its stream: a slot is taken first (refused
 * before anything is queued), the job is queued and followed, and its events are written as
 * `render` shapes them, ending with `data: [DONE]`. A client that goes away cancels the job;
 * a drain out of time ends the stream with where to resume.
 */
export async function streamGeneration(
  c: Context<HonoEnv>,
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
  c: Context<HonoEnv>,
  body: CompletionRequest | ChatCompletionRequest,
  opts: CallOptions,
  gone: AbortSignal,
  render: StreamRenderer,
  slot: StreamSlot,
): Promise<Response> {
  const { completions } = c.get("services");
  const { job, first, events, reading, close } = await openStream(c, body, opts, gone, slot);
  const includeUsage = body.stream_options?.include_usage === true;
  const continuous = continuousUsage(body);
  /** The last job event whose chunks were all sent: where a resume continues from. */
  let lastId: string | undefined;
  const state = new ChoiceState();
  return sse(c, async (stream) => {
    const send = (payload: unknown, id?: string) =>
      stream.send({ ...(id ? { id } : {}), data: JSON.stringify(payload) });
    // vLLM's continuous usage: every chunk with a choice carries the usage so far
    const chunkOf = (chunk: StreamChunk) =>
      continuous && chunk.choices.length > 0 ? state.withUsage(job, chunk) : chunk;
    // an event's chunks (a result's finish and its usage, say) carry its id on the last alone:
    // two chunks with one id, a client cut off between them resumed past the second unseen
    const sendEvent = async (chunks: readonly StreamChunk[], id: string) => {
      for (let k = 0; k < chunks.length; k++)
        await send(chunkOf(chunks[k] as StreamChunk), k === chunks.length - 1 ? id : undefined);
      lastId = id;
    };
    const write = async (event: JobEvent) => {
      const e = event.body;
      if (e.type === "token") {
        state.completionTokens += e.ids?.length ?? 0;
        await sendEvent(render.token(job, e, state), event.id);
      } else if (e.type === "result") {
        const result = completions.countTokens(job, e.result as CompletionResult);
        state.completionTokens = result.usage.completion_tokens;
        await sendEvent(render.end(job, result, includeUsage, state), event.id);
      } else if (e.type === "error") {
        await send(streamError(errorOf(event)), event.id);
        lastId = event.id;
      }
    };
    // the slot comes back however the stream ends, a log that fails to read (Redis) included
    try {
      try {
        for (const chunk of render.start(job, state)) await send(chunkOf(chunk));
        if (!first.done) await write(first.value);
        for await (const event of events) await write(event);
      } finally {
        close();
      }
      if (slot.closing.aborted) {
        const resume = `/v1/jobs/${job.id}/events`;
        const message = `This server is shutting down; the completion goes on: resume at ${resume} with Last-Event-ID ${lastId ?? "(none)"}`;
        await send(streamError(new FerryError("UNAVAILABLE", message), { job: job.id, resume }));
      } else if (!reading.aborted) await stream.send({ data: "[DONE]" });
    } finally {
      slot.release();
    }
  });
}

/**
 * Several choices (several prompts, `n` of each) streamed as one completion (OpenAI, vLLM): a
 * job each, their chunks interleaved as they come, each choice's `index` its place in
 * `severalChoices`. The status line waits until every job has made its first token (an error
 * before that is the answer's status, as for one choice); then each ends with its own finish
 * chunk, usage (summed) comes last when asked for, then `data: [DONE]`. Chunks carry no event
 * `id:`: no one job's log resumes the whole stream (X-Job-Id lists the jobs, each followable
 * at /v1/jobs/{id}/events). A client that goes away, or a job that fails, cancels them all.
 */
export async function streamEach(
  c: Context<HonoEnv>,
  body: CompletionRequest | ChatCompletionRequest,
  choices: ReadonlyArray<CompletionRequest | ChatCompletionRequest>,
  opts: CallOptions,
  gone: AbortSignal,
  render: StreamRenderer,
): Promise<Response> {
  const { completions, streams } = c.get("services");
  const slot = streams.acquire(opts.tenant);
  const reading = new AbortController();
  let jobs: FollowedCompletion[] = [];
  const cancelAll = () => {
    reading.abort();
    for (const { record } of jobs) completions.cancel(record.id);
  };
  const closeAll = () => {
    gone.removeEventListener("abort", cancelAll);
    slot.closing.removeEventListener("abort", onClosing);
    for (const { close } of jobs) close();
  };
  const onClosing = () => reading.abort();
  let opened = false;
  try {
    jobs = await completions.followEach(choices, opts, reading.signal);
    if (gone.aborted) cancelAll();
    gone.addEventListener("abort", cancelAll);
    slot.closing.addEventListener("abort", onClosing);
    c.header("X-Job-Id", jobs.map(({ record }) => record.id).join(", "));
    const firsts = await Promise.all(jobs.map(({ events }) => firstOutput(events)));
    const failed = firsts.find((first) => !first.done && first.value.body.type === "error");
    if (failed || slot.closing.aborted) {
      if (failed && !failed.done) throw errorOf(failed.value);
      throw new FerryError("UNAVAILABLE", "This server is shutting down; send the request again", {
        retryAfterS: 1,
      });
    }
    opened = true;
    return sse(c, async (stream) => {
      const [head] = jobs;
      const id = head ? render.id(head.record) : "";
      const usages: Array<CompletionResult["usage"]> = [];
      const states = jobs.map(() => new ChoiceState());
      let failure = false;
      let writing = Promise.resolve();
      const send = (payload: unknown) => stream.send({ data: JSON.stringify(payload) });
      // one id for the whole stream (clients keep the first chunk's), the choice's index
      const sendAs = (index: number, one: StreamChunk) =>
        send({ ...one, id, choices: one.choices.map((choice) => ({ ...choice, index })) });
      const continuous = continuousUsage(body);
      const write = async (index: number, event: JobEvent | "start") => {
        const job = jobs[index]?.record;
        const state = states[index];
        if (!job || !state || failure) return;
        // vLLM's continuous usage: a choice's chunks carry its own usage so far
        const sendChunk = (chunk: StreamChunk) =>
          sendAs(index, continuous ? state.withUsage(job, chunk) : chunk);
        if (event === "start") {
          for (const first of render.start(job, state)) await sendChunk(first);
          return;
        }
        const e = event.body;
        if (e.type === "token") {
          state.completionTokens += e.ids?.length ?? 0;
          for (const chunk of render.token(job, e, state)) await sendChunk(chunk);
        } else if (e.type === "result") {
          const result = completions.countTokens(job, e.result as CompletionResult);
          usages[index] = result.usage;
          state.completionTokens = result.usage.completion_tokens;
          for (const last of render.end(job, result, false, state)) await sendChunk(last);
        } else if (e.type === "error") {
          failure = true;
          cancelAll();
          await send(streamError(errorOf(event), { index }));
        }
      };
      const pump = async (index: number) => {
        const one = jobs[index];
        const first = firsts[index];
        if (!one || !first) return;
        const each = async (event: JobEvent | "start") => {
          writing = writing.then(() => write(index, event));
          await writing;
        };
        await each("start");
        if (!first.done) await each(first.value);
        for await (const event of one.events) await each(event);
      };
      try {
        try {
          await Promise.all(jobs.map((_, index) => pump(index)));
          await writing;
        } finally {
          closeAll();
        }
        if (slot.closing.aborted && !failure) {
          const ids = jobs.map(({ record }) => record.id);
          const message = `This server is shutting down; the completions go on: follow them at ${ids.map((job) => `/v1/jobs/${job}/events`).join(", ")}`;
          await send(streamError(new FerryError("UNAVAILABLE", message), { jobs: ids }));
        } else if (!reading.signal.aborted || failure) {
          if (!failure && body.stream_options?.include_usage === true && head)
            await send({ ...render.usage(head.record, sumUsage(usages, body.n ?? 1)), id });
          await stream.send({ data: "[DONE]" });
        }
      } finally {
        slot.release();
      }
    });
  } catch (err) {
    // the client is answered with an error, and reads none of them
    cancelAll();
    throw err;
  } finally {
    if (!opened) {
      closeAll();
      slot.release();
    }
  }
}
