import type { CompletionResult, FerryError, JobEvent, JobEventBody } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import { errorOf } from "../http/errors.js";
import {
  functionCallItem,
  messageItem,
  type OutputLogprob,
  outputItems,
  outputLogprobs,
  outputText,
  type ResponsesMeta,
  responseObject,
} from "./responses-render.js";
import type { CallPart, StreamedAnswer, ToolCallStream } from "./tool-call-parsers.js";
import { streamedCallsOf } from "./tool-calls.js";

/** One Responses API stream event: its `type` and payload (the stream numbers it). */
export type ResponseEvent = { type: string } & Record<string, unknown>;

type TokenEvent = Extract<JobEventBody, { type: "token" }>;
type Item = ReturnType<typeof outputItems>[number];

/**
 * A response's stream as OpenAI's events, from its job's events: the message and its text
 * part opened at once and a `response.output_text.delta` per token event; a forced call opened
 * at once and its arguments as `response.function_call_arguments.delta`; a model that chooses
 * between text and calls (`tool_choice: "auto"`) read as the chat's stream reads it (the text
 * as it comes, each call whole once the reader has it); at the result, each item not yet
 * finished closed where it stands, then `response.completed` (or `response.incomplete`).
 */
export class ResponseEvents {
  private readonly reader: ToolCallStream | undefined;
  private readonly opening: ReturnType<typeof messageItem>;
  private readonly forced: ReturnType<typeof functionCallItem> | undefined;
  /** Items sent so far, by output index: opened (still streaming) or done. */
  private readonly sent: Array<{ type: Item["type"]; done: boolean }> = [];
  /** The message's text sent so far (read mode: closed when the first call comes). */
  private text = "";
  /** Calls being streamed (read mode), by their index among the answer's calls. */
  private readonly calls = new Map<
    number,
    { output: number; item: ReturnType<typeof functionCallItem>; args: string }
  >();

  /** Whether `response.in_progress` (and what opens with it) was sent. */
  private running = false;
  /** Whether the response's end (completed, incomplete, failed) was shaped. */
  ended = false;

  /**
   * `queued`: a background response, streamed from its queueing: `response.queued` first, and
   * `response.in_progress` once a worker runs it. In the foreground a stream opens running.
   */
  constructor(
    private readonly job: JobRecord,
    private readonly meta: ResponsesMeta,
    private readonly queued = false,
  ) {
    const { forced, reader } = streamedCallsOf(job.meta, job.id);
    this.reader = reader;
    this.opening = messageItem(job, "", "in_progress");
    this.forced = forced ? functionCallItem(forced, "in_progress") : undefined;
  }

  start(): ResponseEvent[] {
    if (this.queued) {
      const queued = responseObject({ ...this.job, status: "queued" }, this.meta);
      return [
        { type: "response.created", response: queued },
        { type: "response.queued", response: queued },
      ];
    }
    return [{ type: "response.created", response: this.inProgress() }, ...this.run()];
  }

  /** A job event's Responses events: a worker taking the job, a token, the end. */
  next(event: JobEvent): ResponseEvent[] {
    const e = event.body;
    if (e.type === "status") return e.status === "running" ? this.run() : [];
    if (e.type === "token") return this.token(e);
    if (e.type === "result") return this.result(e.result as CompletionResult);
    if (e.type === "error") return this.error(errorOf(event));
    return [];
  }

  private inProgress() {
    return {
      ...responseObject({ ...this.job, status: "queued" }, this.meta),
      status: "in_progress",
    };
  }

  /** `response.in_progress` and the items that open with it, once. */
  private run(): ResponseEvent[] {
    if (this.running) return [];
    this.running = true;
    const events: ResponseEvent[] = [{ type: "response.in_progress", response: this.inProgress() }];
    if (this.forced) {
      events.push({ type: "response.output_item.added", output_index: 0, item: this.forced });
      this.sent.push({ type: "function_call", done: false });
    } else if (!this.reader) events.push(...this.openMessage());
    return events;
  }

  token(e: TokenEvent): ResponseEvent[] {
    return [...this.run(), ...this.delta(e)];
  }

  private delta(e: TokenEvent): ResponseEvent[] {
    const logprobs = outputLogprobs(e.logprobs);
    if (this.reader) return this.read(this.reader.push(e.text), logprobs);
    if (this.forced)
      return e.text
        ? [{ type: "response.function_call_arguments.delta", ...at(this.forced, 0), delta: e.text }]
        : [];
    // (a token that ends inside a character has its log probability, and no text yet)
    return e.text || logprobs.length > 0 ? [this.textDelta(e.text, logprobs)] : [];
  }

  /** The end: what is still open closed, each item not yet sent whole, then the response. */
  result(result: CompletionResult): ResponseEvent[] {
    const events = this.run();
    if (this.reader) events.push(...this.read(this.reader.end(), []));
    for (const [index, item] of outputItems(this.job, result).entries()) {
      const before = this.sent[index];
      if (before?.type === item.type && before.done) continue;
      events.push(...itemEvents(item, index, before?.type === item.type));
    }
    this.ended = true;
    const whole = responseObject({ ...this.job, status: "succeeded" }, this.meta, result);
    const end = whole.status === "incomplete" ? "response.incomplete" : "response.completed";
    events.push({ type: end, response: whole });
    return events;
  }

  /** A failure, or a cancel (the response's status then `cancelled`, as a read-back says). */
  error(error: FerryError): ResponseEvent[] {
    this.ended = true;
    const failed = {
      ...this.job,
      status: error.code === "CANCELLED" ? ("cancelled" as const) : ("failed" as const),
      error: { code: error.code, message: error.message },
    };
    return [
      { type: "error", code: error.code.toLowerCase(), message: error.message, param: null },
      { type: "response.failed", response: responseObject(failed, this.meta) },
    ];
  }

  private openMessage(): ResponseEvent[] {
    this.sent.push({ type: "message", done: false });
    return [
      { type: "response.output_item.added", output_index: 0, item: this.opening },
      {
        type: "response.content_part.added",
        ...at(this.opening, 0),
        content_index: 0,
        part: outputText(""),
      },
    ];
  }

  private textDelta(delta: string, logprobs: OutputLogprob[]): ResponseEvent {
    this.text += delta;
    return {
      type: "response.output_text.delta",
      ...at(this.opening, 0),
      content_index: 0,
      delta,
      logprobs,
    };
  }

  /**
   * What the call reader gives: text into the message (opened when text first comes), and
   * calls' pieces, each call an item of its own (the message closed before the first).
   */
  private read({ content, parts }: StreamedAnswer, logprobs: OutputLogprob[]): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (content) {
      if (this.sent.length === 0) events.push(...this.openMessage());
      const open = this.sent[0];
      if (open?.type === "message" && !open.done) events.push(this.textDelta(content, logprobs));
    }
    for (const part of parts) {
      if (part.id !== undefined) events.push(...this.openCall(part));
      const call = this.calls.get(part.index);
      if (!call) continue;
      if (part.arguments) {
        call.args += part.arguments;
        events.push({
          type: "response.function_call_arguments.delta",
          ...at(call.item, call.output),
          delta: part.arguments,
        });
      }
      if (part.done) {
        const item = { ...call.item, arguments: call.args, status: "completed" as const };
        events.push(
          {
            type: "response.function_call_arguments.done",
            ...at(item, call.output),
            name: item.name,
            arguments: item.arguments,
          },
          { type: "response.output_item.done", output_index: call.output, item },
        );
        const sent = this.sent[call.output];
        if (sent) sent.done = true;
      }
    }
    return events;
  }

  /** A call's first piece: the message closed, the call's item added. */
  private openCall(part: CallPart): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    const open = this.sent[0];
    if (open?.type === "message" && !open.done) {
      events.push(...itemEvents(messageItem(this.job, this.text, "completed"), 0, true));
      open.done = true;
    }
    const item = functionCallItem(
      { id: part.id ?? "", type: "function", function: { name: part.name ?? "", arguments: "" } },
      "in_progress",
    );
    const output = this.sent.length;
    this.calls.set(part.index, { output, item, args: "" });
    this.sent.push({ type: "function_call", done: false });
    events.push({ type: "response.output_item.added", output_index: output, item });
    return events;
  }
}

const at = (item: { id: string }, output_index: number) => ({ item_id: item.id, output_index });

/** An item's events from where it stands (`opened`: added, its text part too) to its end. */
function itemEvents(item: Item, index: number, opened: boolean): ResponseEvent[] {
  const events: ResponseEvent[] = [];
  if (!opened)
    events.push({ type: "response.output_item.added", output_index: index, item: emptied(item) });
  if (item.type === "message") {
    const part = item.content[0] ?? outputText("");
    const where = { ...at(item, index), content_index: 0 };
    if (!opened) {
      events.push({ type: "response.content_part.added", ...where, part: outputText("") });
      if (part.text)
        events.push({
          type: "response.output_text.delta",
          ...where,
          delta: part.text,
          logprobs: part.logprobs,
        });
    }
    events.push(
      { type: "response.output_text.done", ...where, text: part.text, logprobs: part.logprobs },
      { type: "response.content_part.done", ...where, part },
    );
  } else {
    if (!opened)
      events.push({
        type: "response.function_call_arguments.delta",
        ...at(item, index),
        delta: item.arguments,
      });
    events.push({
      type: "response.function_call_arguments.done",
      ...at(item, index),
      name: item.name,
      arguments: item.arguments,
    });
  }
  events.push({ type: "response.output_item.done", output_index: index, item });
  return events;
}

/** An item as `output_item.added` shows it: begun, its text or arguments still to come. */
function emptied<T extends { type: string }>(item: T): T {
  if (item.type === "message") return { ...item, status: "in_progress", content: [] };
  return { ...item, status: "in_progress", arguments: "" };
}
