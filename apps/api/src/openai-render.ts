import type { CompletionResult, FerryError } from "@ferry/protocol";
import type { ChatCompletionResponse, CompletionResponse } from "./schemas.js";

/** The job behind a completion, as OpenAI's objects name it. */
export interface CompletionJob {
  id: string;
  model: string;
  /** Epoch ms. */
  created_at: number;
}

type Finish = "stop" | "length" | null;

/**
 * Every OpenAI-shaped object a completion is answered with, streamed or not, in one place:
 * `text_completion` objects and chunks, the usage chunk, and errors inside a stream.
 */
export function completionChunk(
  job: CompletionJob,
  text: string,
  finish: Finish,
): CompletionResponse {
  return {
    id: `cmpl-${job.id}`,
    object: "text_completion",
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
  };
}

/** The whole completion (a non-streamed answer, or an async job's result). */
export function completionResponse(
  job: CompletionJob,
  result: CompletionResult,
): CompletionResponse {
  return { ...completionChunk(job, result.text, finishOf(result)), usage: result.usage };
}

/** The chunks that end a stream: the finish reason, then usage when asked for. */
export function finalChunks(
  job: CompletionJob,
  result: CompletionResult,
  includeUsage: boolean,
): CompletionResponse[] {
  const last = completionChunk(job, "", finishOf(result));
  if (!includeUsage) return [last];
  return [last, { ...completionChunk(job, "", null), choices: [], usage: result.usage }];
}

/** A failure after the status line went out: all a stream can still say. */
export function streamError(err: FerryError, extra: Record<string, unknown> = {}) {
  return {
    error: {
      message: err.message,
      type: err.code === "UNAVAILABLE" ? "service_unavailable_error" : "server_error",
      code: err.code.toLowerCase(),
      ...extra,
    },
  };
}

function finishOf(result: CompletionResult): "stop" | "length" {
  return result.finish_reason === "length" ? "length" : "stop";
}

/** One streamed chat chunk: `delta` is `{role}` on the first, `{content}` after, `{}` last. */
export function chatChunk(
  job: CompletionJob,
  delta: { role?: "assistant"; content?: string },
  finish: Finish,
) {
  return {
    id: `chatcmpl-${job.id}`,
    object: "chat.completion.chunk" as const,
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  };
}

/** The chunks that end a chat stream: the finish reason, then usage (empty choices) when asked. */
export function chatFinalChunks(
  job: CompletionJob,
  result: CompletionResult,
  includeUsage: boolean,
) {
  const last = chatChunk(job, {}, finishOf(result));
  if (!includeUsage) return [last];
  return [last, { ...chatChunk(job, {}, null), choices: [], usage: result.usage }];
}

/** The whole chat completion (non-streamed, or an async job's result). */
export function chatResponse(job: CompletionJob, result: CompletionResult): ChatCompletionResponse {
  return {
    id: `chatcmpl-${job.id}`,
    object: "chat.completion",
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: result.text },
        logprobs: null,
        finish_reason: finishOf(result),
      },
    ],
    usage: result.usage,
  };
}

/** How a stream of one kind of completion is written: before, per token, at the end. */
export interface StreamRenderer {
  start(job: CompletionJob): unknown[];
  token(job: CompletionJob, text: string): unknown;
  end(job: CompletionJob, result: CompletionResult, includeUsage: boolean): unknown[];
}

export const completionStream: StreamRenderer = {
  start: () => [],
  token: (job, text) => completionChunk(job, text, null),
  end: finalChunks,
};

export const chatStream: StreamRenderer = {
  start: (job) => [chatChunk(job, { role: "assistant", content: "" }, null)],
  token: (job, text) => chatChunk(job, { content: text }, null),
  end: chatFinalChunks,
};
