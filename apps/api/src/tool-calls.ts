import { FerryError, type ModelConfig } from "@ferry/protocol";
import type { ChatCompletionRequest, Tool } from "./schemas.js";

/** How a model writes its calls in text (model.json's `tool_call_parser`). */
export type ToolCallParser = NonNullable<ModelConfig["tool_call_parser"]>;

/**
 * What a chat asked of its tools, kept in its job's meta: the answer is a call of the function
 * `name` (OpenAI's named `tool_choice`, or `required` with one tool), or of whichever function
 * the model picks (`required` with several: the answer is `{"name", "parameters"}`, vLLM's form),
 * or text in which the model may write calls in its own format (`auto`, read by `parser`).
 */
export type ToolCallAsk =
  | { tool_call: "named"; name: string }
  | { tool_call: "required" }
  | { tool_call: "auto"; parser: ToolCallParser };

/** A function without parameters takes an empty object. */
const NO_PARAMETERS = { type: "object", properties: {} };

/**
 * A chat's tool choice: for a forced call, the JSON schema its answer is guided by and how the
 * answer is read back as a call; for `auto`, where the model chooses between text and calls,
 * the parser of the model's own call format (no guide: the model writes what it likes), which
 * its model.json must name, as vLLM's `--tool-call-parser`.
 */
export function toolChoice(
  body: Pick<ChatCompletionRequest, "tools" | "tool_choice" | "stream">,
  parser: ToolCallParser | undefined,
): { schema?: Record<string, unknown>; ask: ToolCallAsk } | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  if (choice === "none") return undefined;
  if (tools.length === 0)
    throw new FerryError("INVALID_INPUT", "tool_choice names a tool, but no tools were given");
  if (choice === "auto") {
    if (parser) return { ask: { tool_call: "auto", parser } };
    throw new FerryError(
      "INVALID_INPUT",
      'tool_choice "auto" (the model choosing between text and a call, OpenAI\'s default when tools are given) needs a parser of the model\'s own call format, and this model\'s model.json names none (tool_call_parser, e.g. "hermes"): give tool_choice "required" or {"type": "function", "function": {"name": ...}}, or "none"',
    );
  }
  const named =
    choice === "required"
      ? tools.length === 1
        ? tools[0]
        : undefined
      : find(tools, choice.function.name);
  if (named)
    return {
      schema: named.function.parameters ?? NO_PARAMETERS,
      ask: { tool_call: "named", name: named.function.name },
    };
  if (body.stream)
    throw new FerryError(
      "INVALID_INPUT",
      'tool_choice "required" over several tools is answered whole, not streamed: name one tool, or stream: false',
    );
  return {
    schema: {
      anyOf: tools.map((tool) => ({
        type: "object",
        properties: {
          name: { const: tool.function.name },
          parameters: tool.function.parameters ?? NO_PARAMETERS,
        },
        required: ["name", "parameters"],
      })),
    },
    ask: { tool_call: "required" },
  };
}

function find(tools: readonly Tool[], name: string): Tool {
  const tool = tools.find((t) => t.function.name === name);
  if (!tool)
    throw new FerryError(
      "INVALID_INPUT",
      `tool_choice names ${name}, which is not among the tools`,
    );
  return tool;
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A call's id: the job's, so that a resumed or polled answer names the same call. */
export function toolCallId(jobId: string): string {
  return `call_${jobId}`;
}

/** A chat's answer: its text, and the calls it made. */
export interface ChatAnswer {
  /** null when the answer is calls alone. */
  content: string | null;
  calls: ToolCall[];
}

/**
 * What an answer says (its text the guided JSON of a forced call, or the model's own text with
 * `auto`). A forced call cut short (`length`) keeps its partial arguments, as OpenAI's does.
 */
export function chatAnswerOf(meta: unknown, jobId: string, text: string): ChatAnswer {
  const ask = meta as Partial<ToolCallAsk> | undefined;
  if (ask?.tool_call === "named")
    return {
      content: null,
      calls: [
        {
          id: toolCallId(jobId),
          type: "function",
          function: { name: ask.name ?? "", arguments: text },
        },
      ],
    };
  if (ask?.tool_call === "auto") return hermesAnswer(text, jobId);
  if (ask?.tool_call !== "required") return { content: text, calls: [] };
  try {
    const { name, parameters } = JSON.parse(text) as { name: string; parameters: unknown };
    return {
      content: null,
      calls: [
        {
          id: toolCallId(jobId),
          type: "function",
          function: { name, arguments: JSON.stringify(parameters) },
        },
      ],
    };
  } catch {
    return {
      content: null,
      calls: [{ id: toolCallId(jobId), type: "function", function: { name: "", arguments: text } }],
    };
  }
}

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

/**
 * The k-th call of an answer's id: the job's (the first as a forced call's), so that a
 * resumed or polled answer names the same calls.
 */
function callId(jobId: string, k: number): string {
  return k === 0 ? toolCallId(jobId) : `${toolCallId(jobId)}_${k}`;
}

/** One call as Hermes writes it (`{"name": ..., "arguments": {...}}`); undefined when it is not one. */
function hermesCall(json: string, id: string): ToolCall | undefined {
  try {
    const call = JSON.parse(json) as { name?: unknown; arguments?: unknown };
    if (typeof call !== "object" || call === null || typeof call.name !== "string")
      return undefined;
    return {
      id,
      type: "function",
      function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
    };
  } catch {
    return undefined;
  }
}

/**
 * Hermes' calls in a whole answer, as vLLM's `hermes` parser reads them: every
 * `<tool_call>...</tool_call>` (the last may be left open), the content the text before the
 * first; a call that does not parse leaves the whole text as content, with no calls.
 */
export function hermesAnswer(text: string, jobId: string): ChatAnswer {
  const at = text.indexOf(OPEN);
  if (at < 0) return { content: text, calls: [] };
  const calls: ToolCall[] = [];
  for (const m of text
    .slice(at)
    .matchAll(/<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)$/g)) {
    const call = hermesCall((m[1] ?? m[2] ?? "").trim(), callId(jobId, calls.length));
    if (!call) return { content: text, calls: [] };
    calls.push(call);
  }
  return { content: at > 0 ? text.slice(0, at) : null, calls };
}

/**
 * Hermes' calls in a streamed answer: the content goes out as it comes, but for what may
 * begin `<tool_call>` (held until it does or cannot); each call goes out whole once its
 * `</tool_call>` arrives, or at the end for one left open. As in the whole answer, the content
 * is the text before the first call; a call that does not parse goes out as text.
 */
export class HermesStream {
  private held = "";
  private inCall = false;
  private made = 0;

  constructor(private readonly jobId: string) {}

  /** Whether a call has gone out (the stream then finishes with `tool_calls`). */
  get called(): boolean {
    return this.made > 0;
  }

  /** Takes the next piece of text; gives what can go out now. */
  push(text: string): ChatAnswer {
    this.held += text;
    let content = "";
    const calls: ToolCall[] = [];
    for (;;) {
      if (this.inCall) {
        const end = this.held.indexOf(CLOSE);
        if (end < 0) break;
        content += this.take(this.held.slice(0, end), calls);
        this.held = this.held.slice(end + CLOSE.length);
        this.inCall = false;
        continue;
      }
      const at = this.held.indexOf(OPEN);
      const free = at >= 0 ? at : this.held.length - heldBack(this.held, OPEN);
      // after the first call, text outside calls is not content (vLLM's)
      if (this.made === 0) content += this.held.slice(0, free);
      this.held = this.held.slice(free);
      if (at < 0) break;
      this.held = this.held.slice(OPEN.length);
      this.inCall = true;
    }
    return { content, calls };
  }

  /** The end of the text: a call left open is read as it stands; what was held goes out. */
  end(): ChatAnswer {
    const calls: ToolCall[] = [];
    let content = "";
    if (this.inCall) content = this.take(this.held, calls);
    else if (this.made === 0) content = this.held;
    this.held = "";
    this.inCall = false;
    return { content, calls };
  }

  /** A call's text: the call, added to `calls`, or (when it is not one) the text to send. */
  private take(body: string, calls: ToolCall[]): string {
    const call = hermesCall(body.trim(), callId(this.jobId, this.made));
    if (!call) return this.made === 0 ? `${OPEN}${body}${CLOSE}` : "";
    this.made++;
    calls.push(call);
    return "";
  }
}

/** How many of `text`'s last characters could begin `tag` (and so wait for what follows). */
function heldBack(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--)
    if (tag.startsWith(text.slice(text.length - n))) return n;
  return 0;
}
