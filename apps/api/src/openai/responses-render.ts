import type { CompletionResult, TokenLogprob } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import { chatLogprobs } from "./logprobs-render.js";
import type { ToolCall } from "./tool-call-parsers.js";
import { chatAnswerOf } from "./tool-calls.js";

/** A turn of a Responses API conversation, as the chat reads it. */
export interface ConversationMessage {
  role: "user" | "assistant" | "system" | "developer" | "tool";
  content: string | null;
  /** An assistant's calls, as its answer made them. */
  tool_calls?: ToolCall[];
  /** A function's output: the call it answers. */
  tool_call_id?: string;
}

/** What a response's job keeps, so that it can be read back and continued. */
export interface ResponsesMeta {
  /** The conversation up to this response's input, instructions left out (they do not carry over). */
  conversation: ConversationMessage[];
  /** The request's fields a response object repeats. */
  echo: ResponseEcho;
}

export interface ResponseEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  previous_response_id: string | null;
  temperature: number;
  top_p: number;
  text: { format: Record<string, unknown> };
  metadata: Record<string, string>;
  user: string | null;
  store: boolean;
  background: boolean;
  parallel_tool_calls: boolean;
  top_logprobs: number;
  tools: unknown[];
  tool_choice: unknown;
}

/** A response's id is its job's. */
export const responseId = (jobId: string) => `resp_${jobId}`;
export const messageId = (jobId: string) => `msg_${jobId}`;
const functionCallId = (call: ToolCall) => `fc_${call.id.replace(/^call_/, "")}`;
export const jobIdOf = (id: string) => (id.startsWith("resp_") ? id.slice(5) : undefined);

export function responsesMetaOf(job: JobRecord): ResponsesMeta | undefined {
  return job.meta.responses as ResponsesMeta | undefined;
}

type Status = "queued" | "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";

/** A job's status as a response's. */
function statusOf(job: JobRecord, result: CompletionResult | undefined): Status {
  if (result) return result.finish_reason === "length" ? "incomplete" : "completed";
  switch (job.status) {
    case "queued":
      return "queued";
    case "running":
      return "in_progress";
    case "cancelled":
      return "cancelled";
    default:
      return "failed";
  }
}

/** The assistant's message of a finished response: its text as one output_text part. */
export function messageItem(
  job: JobRecord,
  text: string,
  status: "in_progress" | "completed" | "incomplete",
  logprobs: OutputLogprob[] = [],
) {
  return {
    type: "message" as const,
    id: messageId(job.id),
    status,
    role: "assistant" as const,
    content: status === "in_progress" ? [] : [outputText(text, logprobs)],
  };
}

/** A token's log probability, and its likeliest alternatives' (the chat's shape). */
export type OutputLogprob = ReturnType<typeof chatLogprobs>["content"][number];

export const outputText = (text: string, logprobs: OutputLogprob[] = []) => ({
  type: "output_text" as const,
  text,
  annotations: [],
  logprobs,
});

/** Token events' or a result's log probabilities as an output_text lists them (none unasked). */
export function outputLogprobs(entries: readonly TokenLogprob[] | undefined): OutputLogprob[] {
  return entries ? chatLogprobs(entries).content : [];
}

/** A call the answer made, as the Responses API lists it among the output. */
export function functionCallItem(call: ToolCall, status: "in_progress" | "completed") {
  return {
    type: "function_call" as const,
    id: functionCallId(call),
    call_id: call.id,
    name: call.function.name,
    arguments: status === "completed" ? call.function.arguments : "",
    status,
  };
}

/**
 * A finished answer's output items: its text as a message (when it has text, or made no
 * call), then each call it made.
 */
export function outputItems(job: JobRecord, result: CompletionResult) {
  const { content, calls } = chatAnswerOf(job.meta, job.id, result.text);
  const status = result.finish_reason === "length" ? "incomplete" : "completed";
  return [
    ...(content || calls.length === 0
      ? [messageItem(job, content ?? "", status, outputLogprobs(result.logprobs))]
      : []),
    ...calls.map((call) => functionCallItem(call, "completed")),
  ];
}

/** The assistant's turn a finished answer adds to its conversation. */
export function answerTurn(job: JobRecord, result: CompletionResult): ConversationMessage {
  const { content, calls } = chatAnswerOf(job.meta, job.id, result.text);
  return { role: "assistant", content, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
}

/**
 * OpenAI's response object for a job: in progress (no output yet), or finished with its
 * message, usage and why it stopped where it did (`max_output_tokens`).
 */
export function responseObject(job: JobRecord, meta: ResponsesMeta, result?: CompletionResult) {
  const status = statusOf(job, result);
  const finished = result !== undefined;
  return {
    id: responseId(job.id),
    object: "response" as const,
    created_at: Math.floor(job.created_at / 1000),
    status,
    error:
      status === "failed"
        ? { code: "server_error", message: job.error?.message ?? "the response failed" }
        : null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    ...meta.echo,
    model: job.model,
    output: finished ? outputItems(job, result) : [],
    reasoning: { effort: null, summary: null },
    truncation: "disabled",
    usage: finished
      ? {
          input_tokens: result.usage.prompt_tokens,
          input_tokens_details: {
            cached_tokens: result.usage.prompt_tokens_details?.cached_tokens ?? 0,
          },
          output_tokens: result.usage.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: result.usage.total_tokens,
        }
      : null,
  };
}

/** An item a response was given, as `GET /v1/responses/{id}/input_items` lists it. */
export type InputItem =
  | {
      type: "message";
      id: string;
      role: ConversationMessage["role"];
      status: "completed";
      content: Array<{ type: "input_text"; text: string } | ReturnType<typeof outputText>>;
    }
  | ReturnType<typeof functionCallItem>
  | {
      type: "function_call_output";
      id: string;
      call_id: string;
      output: string;
      status: "completed";
    };

/**
 * The items a response was given, oldest first: its whole conversation (the turns of the
 * responses it continues and their answers included, as OpenAI lists them; the instructions
 * left out, as they do not carry over). A message's id is its place in the conversation, a
 * call's the id its answer gave it.
 */
export function inputItems(job: JobRecord, meta: ResponsesMeta): InputItem[] {
  const items: InputItem[] = [];
  for (const [i, turn] of meta.conversation.entries()) {
    const id = `msg_${job.id}_${i}`;
    if (turn.role === "tool")
      items.push({
        type: "function_call_output",
        id: `fco_${job.id}_${i}`,
        call_id: turn.tool_call_id ?? "",
        output: turn.content ?? "",
        status: "completed",
      });
    else if (turn.role === "assistant") {
      if (turn.content || !turn.tool_calls?.length)
        items.push({
          type: "message",
          id,
          role: "assistant",
          status: "completed",
          content: [outputText(turn.content ?? "")],
        });
      for (const call of turn.tool_calls ?? []) items.push(functionCallItem(call, "completed"));
    } else
      items.push({
        type: "message",
        id,
        role: turn.role,
        status: "completed",
        content: [{ type: "input_text", text: turn.content ?? "" }],
      });
  }
  return items;
}
