import type { CompletionResult, FerryError, JobEventBody } from "@ferry/protocol";
import {
  type CompletionJob,
  chatLogprobs,
  completionLogprobs,
  echoedLogprobs,
  TextOffsets,
  vllmPromptLogprobs,
} from "./logprobs-render.js";
import type {
  ChatCompletionResponse,
  ChatLogprobs,
  CompletionLogprobs,
  CompletionResponse,
} from "./output-schemas.js";
import type { CallPart, StreamedAnswer, ToolCallStream } from "./tool-call-parsers.js";
import { chatAnswerOf, streamedCallsOf } from "./tool-calls.js";

type Finish = "stop" | "length" | "tool_calls" | null;
type Usage = CompletionResult["usage"];

/**
 * Every OpenAI-shaped object a completion is answered with, streamed or not, in one place:
 * `text_completion` objects and chunks, the usage chunk, and errors inside a stream.
 */
export function completionChunk(
  job: CompletionJob,
  text: string,
  finish: Exclude<Finish, "tool_calls">,
  logprobs: CompletionLogprobs | null = null,
): CompletionResponse {
  return {
    id: completionStream.id(job),
    object: "text_completion",
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [{ text, index: 0, logprobs, finish_reason: finish }],
  };
}

/** The whole completion (a non-streamed answer, or an async job's result). */
export function completionResponse(
  job: CompletionJob,
  result: CompletionResult,
): CompletionResponse {
  const logprobs = result.logprobs
    ? completionLogprobs([...echoedLogprobs(job, result), ...result.logprobs])
    : null;
  const response = completionChunk(job, result.text, finishOf(result), logprobs);
  return {
    ...response,
    choices: response.choices.map((choice) => ({ ...choice, ...vllmPromptLogprobs(job, result) })),
    usage: result.usage,
  };
}

/** The chunks that end a stream: the finish reason, then usage when asked for. */
export function finalChunks(
  job: CompletionJob,
  result: CompletionResult,
  includeUsage: boolean,
): CompletionResponse[] {
  const last = completionChunk(job, "", finishOf(result));
  return includeUsage ? [last, completionUsageChunk(job, result.usage)] : [last];
}

/** A stream's last chunk before `[DONE]` when usage was asked for: no choices, the usage. */
function completionUsageChunk(job: CompletionJob, usage: Usage): CompletionResponse {
  return { ...completionChunk(job, "", null), choices: [], usage };
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

/** A streamed call's part: the first names it, the others add to its arguments. */
interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/** One streamed chat chunk: `delta` is `{role}` on the first, `{content}` after, `{}` last. */
export function chatChunk(
  job: CompletionJob,
  delta: { role?: "assistant"; content?: string | null; tool_calls?: ToolCallDelta[] },
  finish: Finish,
  logprobs: ChatLogprobs | null = null,
) {
  return {
    id: chatStream.id(job),
    object: "chat.completion.chunk" as const,
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
  };
}

/**
 * The chunks that end a chat stream: what the model's call reader still held (content, or a
 * call left open), the finish reason, then usage (empty choices) when asked.
 */
export function chatFinalChunks(
  job: CompletionJob,
  result: CompletionResult,
  includeUsage: boolean,
  state?: ChoiceState,
) {
  const held = state?.tools ? chatDeltas(job, state.tools.end(), null) : [];
  const last = chatChunk(
    job,
    {},
    callsFinish(job, finishOf(result), state?.tools?.called ?? false),
  );
  return includeUsage ? [...held, last, chatUsageChunk(job, result.usage)] : [...held, last];
}

/**
 * A chat's finish when it made calls: a call the model chose (among several tools, or between
 * text and calls) ends as a call, "tool_calls"; a forced call of one function as OpenAI's
 * does, "stop"; one cut short stays "length".
 */
function callsFinish(
  job: CompletionJob,
  finish: "stop" | "length",
  called: boolean,
): "stop" | "length" | "tool_calls" {
  const chose = job.meta?.tool_call === "required" || job.meta?.tool_call === "auto";
  return called && chose && finish === "stop" ? "tool_calls" : finish;
}

function chatUsageChunk(job: CompletionJob, usage: Usage) {
  return { ...chatChunk(job, {}, null), choices: [], usage };
}

/** The whole chat completion (non-streamed, or an async job's result). */
export function chatResponse(job: CompletionJob, result: CompletionResult): ChatCompletionResponse {
  const { content, calls } = chatAnswerOf(job.meta, job.id, result.text);
  return {
    id: chatStream.id(job),
    object: "chat.completion",
    created: Math.floor(job.created_at / 1000),
    model: job.model,
    choices: [
      {
        index: 0,
        message:
          calls.length > 0
            ? { role: "assistant", content, tool_calls: calls }
            : { role: "assistant", content: content ?? "" },
        logprobs: result.logprobs ? chatLogprobs(result.logprobs) : null,
        finish_reason: callsFinish(job, finishOf(result), calls.length > 0),
      },
    ],
    usage: result.usage,
    ...vllmPromptLogprobs(job, result),
  };
}

/** What a stream keeps per choice from chunk to chunk. */
export class ChoiceState {
  readonly offsets = new TextOffsets();
  /** The calls read from a chat's text, when its model may write them (`tool_choice: "auto"`). */
  tools: ToolCallStream | undefined;
  /** Tokens the job has sampled so far (its token events' ids). */
  completionTokens = 0;

  /** `chunk` with the usage so far (vLLM's continuous usage stats). */
  withUsage<T extends object>(job: CompletionJob, chunk: T): T & { usage: Usage } {
    const prompt = Number(job.meta?.prompt_tokens ?? 0);
    return {
      ...chunk,
      usage: {
        prompt_tokens: prompt,
        completion_tokens: this.completionTokens,
        total_tokens: prompt + this.completionTokens,
      },
    };
  }
}

/**
 * A read piece of a streamed answer as chunks: its content (with the token's log
 * probabilities), then its calls' pieces, each call's first naming it.
 */
function chatDeltas(
  job: CompletionJob,
  { content, parts }: StreamedAnswer,
  logprobs: ChatLogprobs | null,
) {
  const out: Array<ReturnType<typeof chatChunk>> = [];
  if (content || logprobs) out.push(chatChunk(job, { content: content ?? "" }, null, logprobs));
  // a call's last piece may add nothing
  const sending = parts.filter((p) => p.id !== undefined || p.arguments);
  if (sending.length > 0)
    out.push(chatChunk(job, { tool_calls: sending.map(toolCallDelta) }, null));
  return out;
}

/** A call's piece as OpenAI's streamed `tool_calls` entry. */
function toolCallDelta(part: CallPart) {
  return {
    index: part.index,
    ...(part.id !== undefined ? { id: part.id, type: "function" as const } : {}),
    function: {
      ...(part.name !== undefined ? { name: part.name } : {}),
      arguments: part.arguments,
    },
  };
}

/** A job's token event, as a stream renders it. */
type TokenEvent = Extract<JobEventBody, { type: "token" }>;

/** A streamed chunk as every renderer shapes it: an id, and choices that carry an index. */
export interface StreamChunk {
  id: string;
  choices: Array<{ index: number }>;
}

/** How a stream of one kind of completion is written: before, per token, at the end. */
export interface StreamRenderer {
  /** The id every chunk of a job's stream carries. */
  id(job: CompletionJob): string;
  start(job: CompletionJob, state: ChoiceState): StreamChunk[];
  /** A token event's chunks (none while text is held back); `state` is the choice's own. */
  token(job: CompletionJob, event: TokenEvent, state: ChoiceState): StreamChunk[];
  end(
    job: CompletionJob,
    result: CompletionResult,
    includeUsage: boolean,
    state: ChoiceState,
  ): StreamChunk[];
  /** The usage chunk alone (several choices streamed as one: their usage, summed, at the end). */
  usage(job: CompletionJob, usage: Usage): StreamChunk;
}

export const completionStream: StreamRenderer = {
  id: (job) => `cmpl-${job.id}`,
  start: () => [],
  token: (job, { text, logprobs, prompt_logprobs: prompt = [] }, { offsets }) => [
    completionChunk(
      job,
      text,
      null,
      logprobs ? completionLogprobs([...prompt, ...logprobs], offsets) : null,
    ),
  ],
  end: (job, result, includeUsage) => finalChunks(job, result, includeUsage),
  usage: completionUsageChunk,
};

export const chatStream: StreamRenderer = {
  id: (job) => `chatcmpl-${job.id}`,
  // a forced call (one function by name: the only kind streamed) opens by naming it, and
  // its arguments come token by token; a model that may write calls has them read as it goes
  start: (job, state) => {
    const { forced: call, reader } = streamedCallsOf(job.meta, job.id);
    state.tools = reader;
    return [
      chatChunk(
        job,
        call
          ? { role: "assistant", content: null, tool_calls: [{ index: 0, ...call }] }
          : { role: "assistant", content: "" },
        null,
      ),
    ];
  },
  token: (job, { text, logprobs }, state) => {
    const scores = logprobs ? chatLogprobs(logprobs) : null;
    if (state.tools) return chatDeltas(job, state.tools.push(text), scores);
    return [
      chatChunk(
        job,
        job.meta?.tool_call === "named"
          ? { tool_calls: [{ index: 0, function: { arguments: text } }] }
          : { content: text },
        null,
        scores,
      ),
    ];
  },
  end: chatFinalChunks,
  usage: chatUsageChunk,
};
