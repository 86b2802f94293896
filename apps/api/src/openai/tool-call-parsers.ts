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

/**
 * A piece of a streamed call, as OpenAI streams one: the first names it (`id`, `name`), the
 * rest add to its arguments, the last is `done`. A call read whole is one piece.
 */
export interface CallPart {
  /** The call's place among the answer's calls. */
  index: number;
  id?: string;
  name?: string;
  arguments: string;
  done?: true;
}

/** What a streamed answer gives as it is read: content, and pieces of calls. */
export interface StreamedAnswer {
  content: string | null;
  parts: CallPart[];
}

/** A call read whole, as the one piece that streams it. */
function wholePart(call: ToolCall, index: number): CallPart {
  return {
    index,
    id: call.id,
    name: call.function.name,
    arguments: call.function.arguments,
    done: true,
  };
}

/** A streamed answer's calls, read as its text comes. */
export interface ToolCallStream {
  /** Takes the next piece of text; gives what can go out now. */
  push(text: string): StreamedAnswer;
  /** The end of the text: what was held goes out. */
  end(): StreamedAnswer;
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
    const body = m[1] ?? m[2] ?? "";
    const call = callOf(parsed(body.trim()), callId(jobId, calls.length));
    if (!call) return { content: text, calls: [] };
    calls.push(asWritten(call, body));
  }
  return { content: at > 0 ? text.slice(0, at) : null, calls };
}

/**
 * Where a Hermes call's arguments begin, once its head is in: `{"name": "...", "arguments": `
 * before an object (the order Hermes' and Qwen's templates teach).
 */
const CALL_HEAD = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(?=\{)/;

/**
 * Hermes' calls in a streamed answer: the content goes out as it comes, but for what may
 * begin `<tool_call>` (held until it does or cannot). A call whose head names it before its
 * arguments (`{"name": ..., "arguments": {...}}`) is named as soon as the head is in, and its
 * arguments go out as they come, as written but for blanks outside strings (the whole
 * answer's arguments are the same text); one written otherwise goes out whole at its
 * `</tool_call>`, or at the end for one left open. As in the whole answer, the content is the
 * text before the first call, and a call that does not parse goes out as text; one whose
 * arguments went out already cannot be taken back (vLLM's stream has the same limit).
 */
export class HermesStream implements ToolCallStream {
  private held = "";
  private inCall = false;
  private made = 0;
  /** The current call's text so far. */
  private body = "";
  /** The current call, once named: its index, and where its arguments stand. */
  private streaming: { index: number; args: ArgumentsScanner } | undefined;

  constructor(private readonly jobId: string) {}

  get called(): boolean {
    return this.made > 0;
  }

  push(text: string): StreamedAnswer {
    this.held += text;
    let content = "";
    const parts: CallPart[] = [];
    for (;;) {
      if (this.inCall) {
        const end = this.held.indexOf(CLOSE);
        const upto = end >= 0 ? end : this.held.length - heldBack(this.held, CLOSE);
        this.feed(this.held.slice(0, upto), parts);
        this.held = this.held.slice(upto);
        if (end < 0) break;
        this.held = this.held.slice(CLOSE.length);
        content += this.close(parts);
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
    return { content, parts };
  }

  /** A call left open is read as it stands. */
  end(): StreamedAnswer {
    const parts: CallPart[] = [];
    let content = "";
    if (this.inCall) {
      this.feed(this.held, parts);
      content = this.close(parts);
    } else if (this.made === 0) content = this.held;
    this.held = "";
    return { content, parts };
  }

  /** More of the current call's text: its name once its head is in, then its arguments. */
  private feed(text: string, parts: CallPart[]): void {
    this.body += text;
    if (this.streaming) {
      const more = this.streaming.args.push(text);
      if (more) parts.push({ index: this.streaming.index, arguments: more });
      return;
    }
    const head = CALL_HEAD.exec(this.body);
    const name = head ? parsed(`"${head[1]}"`) : undefined;
    if (!head || typeof name !== "string") return;
    const index = this.made++;
    this.streaming = { index, args: new ArgumentsScanner() };
    parts.push({ index, id: callId(this.jobId, index), name, arguments: "" });
    const more = this.streaming.args.push(this.body.slice(head[0].length));
    if (more) parts.push({ index, arguments: more });
  }

  /** The current call's end: its last piece, the call whole, or (not a call) the text to send. */
  private close(parts: CallPart[]): string {
    const body = this.body;
    const streaming = this.streaming;
    this.inCall = false;
    this.body = "";
    this.streaming = undefined;
    if (streaming) {
      parts.push({ index: streaming.index, arguments: "", done: true });
      return "";
    }
    const call = callOf(parsed(body.trim()), callId(this.jobId, this.made));
    if (!call) return this.made === 0 ? `${OPEN}${body}${CLOSE}` : "";
    parts.push(wholePart(call, this.made++));
    return "";
  }
}

/**
 * A name-first call with its arguments as the model wrote them, blanks outside strings
 * dropped: what a stream of it sends, so that the whole answer and the stream agree to the
 * byte (escapes and number forms kept as written, as OpenAI keeps a model's arguments). A
 * call written otherwise keeps JSON.stringify's form.
 */
function asWritten(call: ToolCall, body: string): ToolCall {
  const head = CALL_HEAD.exec(body);
  if (!head) return call;
  const scanner = new ArgumentsScanner();
  const written = scanner.push(body.slice(head[0].length));
  return scanner.complete ? { ...call, function: { ...call.function, arguments: written } } : call;
}

/**
 * A JSON object's text as it streams, without the blanks outside its strings, up to its
 * closing brace (what follows it is not the arguments').
 */
class ArgumentsScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private ended = false;

  /** Whether the object has closed. */
  get complete(): boolean {
    return this.ended;
  }

  push(text: string): string {
    let out = "";
    for (const c of text) {
      if (this.ended) break;
      if (this.inString) {
        out += c;
        if (this.escaped) this.escaped = false;
        else if (c === "\\") this.escaped = true;
        else if (c === '"') this.inString = false;
        continue;
      }
      if (c === " " || c === "\n" || c === "\t" || c === "\r") continue;
      out += c;
      if (c === '"') this.inString = true;
      else if (c === "{" || c === "[") this.depth++;
      else if (c === "}" || c === "]") {
        this.depth--;
        if (this.depth === 0) this.ended = true;
      }
    }
    return out;
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

  push(text: string): StreamedAnswer {
    if (this.mode === "content") return { content: text, parts: [] };
    this.held += text;
    const start = this.held.trimStart();
    if (start.length === 0) return { content: "", parts: [] };
    if (start.startsWith("{") || start.startsWith(PYTHON_TAG)) this.mode = "call";
    else if (!PYTHON_TAG.startsWith(start)) {
      this.mode = "content";
      const content = this.held;
      this.held = "";
      return { content, parts: [] };
    }
    return { content: "", parts: [] };
  }

  end(): StreamedAnswer {
    const answer = llama3Answer(this.held, this.jobId);
    this.made += answer.calls.length;
    this.held = "";
    return { content: answer.content ?? "", parts: answer.calls.map(wholePart) };
  }
}

const READERS: Record<ToolCallParser, ToolCallReader> = {
  hermes: { whole: hermesAnswer, stream: (jobId) => new HermesStream(jobId) },
  llama3_json: { whole: llama3Answer, stream: (jobId) => new Llama3Stream(jobId) },
};
