import type { ModelConfig } from "@ferry/protocol";

/** How a model writes its calls in text (model.json's `tool_call_parser`, vLLM's names). */
export type ToolCallParser = NonNullable<ModelConfig["tool_call_parser"]>;

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A chat's answer: its text, and the calls it made. */
export interface ChatAnswer {
  /** null when the answer is calls alone. */
  content: string | null;
  calls: ToolCall[];
}

/** A call's id: the job's, so that a resumed or polled answer names the same call. */
export function toolCallId(jobId: string): string {
  return `call_${jobId}`;
}

/**
 * The k-th call of an answer's id: the job's (the first as a forced call's), so that a
 * resumed or polled answer names the same calls.
 */
function callId(jobId: string, k: number): string {
  return k === 0 ? toolCallId(jobId) : `${toolCallId(jobId)}_${k}`;
}

/** A streamed answer's calls, read as its text comes. */
export interface ToolCallStream {
  /** Takes the next piece of text; gives what can go out now. */
  push(text: string): ChatAnswer;
  /** The end of the text: what was held goes out. */
  end(): ChatAnswer;
  /** Whether a call has gone out (the stream then finishes with `tool_calls`). */
  readonly called: boolean;
}

/** How one format's calls are read from a model's text, whole or as it streams. */
export interface ToolCallReader {
  whole(text: string, jobId: string): ChatAnswer;
  stream(jobId: string): ToolCallStream;
}

export function toolCallReader(parser: ToolCallParser): ToolCallReader {
  return READERS[parser];
}

/** One call as JSON (`{"name", "arguments"}`, or Llama's `"parameters"`); undefined when it is not one. */
function callOf(json: unknown, id: string): ToolCall | undefined {
  if (typeof json !== "object" || json === null) return undefined;
  const call = json as { name?: unknown; arguments?: unknown; parameters?: unknown };
  if (typeof call.name !== "string") return undefined;
  return {
    id,
    type: "function",
    function: {
      name: call.name,
      arguments: JSON.stringify(call.arguments ?? call.parameters ?? {}),
    },
  };
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

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
    const call = callOf(parsed((m[1] ?? m[2] ?? "").trim()), callId(jobId, calls.length));
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
export class HermesStream implements ToolCallStream {
  private held = "";
  private inCall = false;
  private made = 0;

  constructor(private readonly jobId: string) {}

  get called(): boolean {
    return this.made > 0;
  }

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

  /** A call left open is read as it stands. */
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
    const call = callOf(parsed(body.trim()), callId(this.jobId, this.made));
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

/** What Llama 3.x writes before a call it means for a tool (its `<|python_tag|>` token). */
const PYTHON_TAG = "<|python_tag|>";

/**
 * Llama 3's JSON calls in a whole answer, as vLLM's `llama3_json` parser reads them: an answer
 * that begins with `{` (or `<|python_tag|>`) is one or more `{"name", "parameters"}` objects,
 * separated by `;`, and no content; anything else, or such an answer that does not parse, is
 * content.
 */
export function llama3Answer(text: string, jobId: string): ChatAnswer {
  const body = text.trimStart();
  const tagged = body.startsWith(PYTHON_TAG);
  if (!tagged && !body.startsWith("{")) return { content: text, calls: [] };
  const calls: ToolCall[] = [];
  let rest = (tagged ? body.slice(PYTHON_TAG.length) : body).trim();
  while (rest.length > 0) {
    const end = objectEnd(rest);
    const call =
      end > 0 ? callOf(parsed(rest.slice(0, end)), callId(jobId, calls.length)) : undefined;
    if (!call) return { content: text, calls: [] };
    calls.push(call);
    rest = rest.slice(end).replace(/^\s*;?\s*/, "");
  }
  return calls.length > 0 ? { content: null, calls } : { content: text, calls: [] };
}

/** Where the JSON object `text` begins with ends (after its `}`), or 0 when it does not close. */
function objectEnd(text: string): number {
  if (!text.startsWith("{")) return 0;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return 0;
}

/**
 * Llama 3's calls in a streamed answer: text that begins otherwise than a call goes out as it
 * comes; one that begins with `{` or `<|python_tag|>` is held whole, and read at the end.
 */
class Llama3Stream implements ToolCallStream {
  private held = "";
  /** Whether the text is content (known from its first characters), or held as a call. */
  private mode: "undecided" | "content" | "call" = "undecided";
  private made = 0;

  constructor(private readonly jobId: string) {}

  get called(): boolean {
    return this.made > 0;
  }

  push(text: string): ChatAnswer {
    if (this.mode === "content") return { content: text, calls: [] };
    this.held += text;
    const start = this.held.trimStart();
    if (start.length === 0) return { content: "", calls: [] };
    if (start.startsWith("{") || start.startsWith(PYTHON_TAG)) this.mode = "call";
    else if (!PYTHON_TAG.startsWith(start)) {
      this.mode = "content";
      const content = this.held;
      this.held = "";
      return { content, calls: [] };
    }
    return { content: "", calls: [] };
  }

  end(): ChatAnswer {
    const answer = llama3Answer(this.held, this.jobId);
    this.made += answer.calls.length;
    this.held = "";
    return { content: answer.content ?? "", calls: answer.calls };
  }
}

const READERS: Record<ToolCallParser, ToolCallReader> = {
  hermes: { whole: hermesAnswer, stream: (jobId) => new HermesStream(jobId) },
  llama3_json: { whole: llama3Answer, stream: (jobId) => new Llama3Stream(jobId) },
};
