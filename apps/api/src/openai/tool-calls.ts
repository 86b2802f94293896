import { FerryError, type SamplingParams } from "@ferry/protocol";
import type { ChatCompletionRequest, Tool } from "./schemas.js";
import {
  type CallPart,
  type ChatAnswer,
  type StreamedAnswer,
  type ToolCall,
  type ToolCallParser,
  type ToolCallStream,
  toolCallId,
  toolCallReader,
} from "./tool-call-parsers.js";

/**
 * What a chat asked of its tools, kept in its job's meta: the answer is a call of the function
 * `name` (OpenAI's named `tool_choice`, or `required` with one tool), or of whichever function
 * the model picks (`required` with several: the answer is `{"name", "parameters"}`, vLLM's form),
 * or text in which the model may write calls in its own format (`auto`, read by `parser`).
 */
export type ToolCallAsk =
  | { tool_call: "named"; name: string }
  | { tool_call: "required" }
  | { tool_call: "auto"; parser: ToolCallParser; single?: true };

/**
 * A chat's tool choice as its completion is guided: a forced call's schema, or for `auto` the
 * tools whose calls a Hermes-format model may open in its text, and how the answer is read.
 */
export interface ToolChoice {
  schema?: Record<string, unknown>;
  calls?: NonNullable<SamplingParams["tool_calls_guide"]>;
  ask: ToolCallAsk;
}

/** A function without parameters takes an empty object. */
const NO_PARAMETERS = { type: "object", properties: {} };

/**
 * The schema a call's arguments are guided by: its parameters', always an object's (`{}`, or
 * properties with no type, had let the model answer a string or a number as the arguments).
 */
function argumentsSchema(parameters: Record<string, unknown> | undefined) {
  if (parameters === undefined) return NO_PARAMETERS;
  return parameters.type === undefined ? { ...parameters, type: "object" } : parameters;
}

/**
 * A chat's tool choice: for a forced call, the JSON schema its answer is guided by and how the
 * answer is read back as a call; for `auto`, where the model chooses between text and calls,
 * the parser of the model's own call format (no guide: the model writes what it likes), which
 * its model.json must name, as vLLM's `--tool-call-parser`.
 */
export function toolChoice(
  body: Pick<ChatCompletionRequest, "tools" | "tool_choice" | "stream" | "parallel_tool_calls">,
  parser: ToolCallParser | undefined,
): ToolChoice | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  if (choice === "none") return undefined;
  if (tools.length === 0)
    throw new FerryError("INVALID_INPUT", "tool_choice names a tool, but no tools were given");
  if (choice === "auto") {
    // OpenAI's parallel_tool_calls: false, at most one call: the first the model wrote
    if (parser)
      return {
        ask: {
          tool_call: "auto",
          parser,
          ...(body.parallel_tool_calls === false ? { single: true as const } : {}),
        },
        // a call the model opens in Hermes' format is guided by its tool's parameters
        ...(parser === "hermes"
          ? {
              calls: {
                format: "hermes" as const,
                tools: tools.map((t) => ({
                  name: t.function.name,
                  parameters: argumentsSchema(t.function.parameters),
                })),
                ...(body.parallel_tool_calls === false ? { single: true } : {}),
              },
            }
          : {}),
      };
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
      schema: argumentsSchema(named.function.parameters),
      ask: { tool_call: "named", name: named.function.name },
    };
  return { schema: anyToolSchema(tools), ask: { tool_call: "required" } };
}

/**
 * `required` over several tools: an anyOf of `{"name", "parameters"}`, one branch a tool.
 * A tool whose parameters refer to anything moves to the root's definitions (`t<k>`, its own
 * `$defs` beside it as `t<k>_<name>`), its references following: they are to its own
 * schema's root, which is no longer the document's (a pydantic model's `$defs` had been
 * "points at nothing"). References then never pass through the anyOf's list.
 */
function anyToolSchema(tools: readonly Tool[]): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  const anyOf = tools.map((tool, k) => {
    const schema = argumentsSchema(tool.function.parameters) as Record<string, unknown>;
    let parameters: unknown = schema;
    if (JSON.stringify(schema).includes('"$ref"')) {
      const moved = (ref: string) => {
        const local = /^#\/(?:\$defs|definitions)\/(.*)$/.exec(ref);
        if (local) return `#/$defs/t${k}_${local[1]}`;
        return ref === "#" || ref.startsWith("#/") ? `#/$defs/t${k}${ref.slice(1)}` : ref;
      };
      const { $defs, definitions, ...rest } = schema as {
        $defs?: Record<string, unknown>;
        definitions?: Record<string, unknown>;
      };
      for (const [name, def] of Object.entries({ ...definitions, ...$defs }))
        defs[`t${k}_${name}`] = withRefs(def, moved);
      defs[`t${k}`] = withRefs(rest, moved);
      parameters = { $ref: `#/$defs/t${k}` };
    }
    return {
      type: "object",
      properties: { name: { const: tool.function.name }, parameters },
      required: ["name", "parameters"],
    };
  });
  return Object.keys(defs).length > 0 ? { anyOf, $defs: defs } : { anyOf };
}

/** `schema` with every `$ref` string moved by `move` (tools nest 64 levels at most). */
function withRefs(schema: unknown, move: (ref: string) => string): unknown {
  if (Array.isArray(schema)) return schema.map((item) => withRefs(item, move));
  if (typeof schema !== "object" || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [
      key,
      key === "$ref" && typeof value === "string" ? move(value) : withRefs(value, move),
    ]),
  );
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

/**
 * How a job's answer streams its calls: the forced call it opens with (named before its
 * first token, its arguments the text that follows), or a reader of the calls a model that
 * may write them writes (with `parallel_tool_calls: false`, the first alone); neither for an
 * answer that is text.
 */
export function streamedCallsOf(
  meta: unknown,
  jobId: string,
): { forced?: ToolCall; reader?: ToolCallStream } {
  const ask = meta as Partial<ToolCallAsk> | undefined;
  if (ask?.tool_call === "named") {
    const [forced] = chatAnswerOf(meta, jobId, "").calls;
    return forced ? { forced } : {};
  }
  if (ask?.tool_call === "required") return { reader: requiredCallStream(jobId) };
  if (ask?.tool_call !== "auto") return {};
  const reader = toolCallReader(ask.parser ?? "hermes").stream(jobId);
  return { reader: ask.single ? firstCallOnly(reader) : reader };
}

/** A reader that passes on the pieces of an answer's first call alone. */
function firstCallOnly(reader: ToolCallStream): ToolCallStream {
  const first = (answer: StreamedAnswer) => ({
    ...answer,
    parts: answer.parts.filter((part) => part.index === 0),
  });
  return {
    push: (text) => first(reader.push(text)),
    end: () => first(reader.end()),
    get called() {
      return reader.called;
    },
  };
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
  if (ask?.tool_call === "auto") {
    const answer = toolCallReader(ask.parser ?? "hermes").whole(text, jobId);
    return ask.single ? { ...answer, calls: answer.calls.slice(0, 1) } : answer;
  }
  if (ask?.tool_call !== "required") return { content: text, calls: [] };
  const call = requiredCallOf(text);
  return {
    content: null,
    calls: [
      {
        id: toolCallId(jobId),
        type: "function",
        function: call ?? { name: "", arguments: text },
      },
    ],
  };
}

/**
 * What `tool_choice: "required"` over several tools writes, guided by an anyOf of
 * `{"name": <a tool's>, "parameters": <its schema>}` (names first: XGrammar keeps the schema's
 * order): up to the parameters' value, with the tool it names.
 */
const REQUIRED_HEAD = /^\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_-]*)"\s*,\s*"parameters"\s*:\s*(?=\S)/;

/**
 * A "required" answer's call: its name, and its arguments as the model wrote them (the
 * parameters' text, the object around them taken off once it closed; cut short, the text
 * that came). Undefined when the text ends before it names a tool.
 */
function requiredCallOf(text: string): { name: string; arguments: string } | undefined {
  const head = REQUIRED_HEAD.exec(text);
  if (!head) return undefined;
  const rest = text.slice(head[0].length);
  return { name: head[1] ?? "", arguments: closed(text) ? argumentsOf(rest) : rest };
}

/** Whether the answer's object closed (the guide ends it there; `length` cuts it before). */
function closed(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The parameters' text: the object's own closing brace, and the space around it, taken off. */
const argumentsOf = (rest: string) => rest.replace(/\s*\}\s*$/, "");

/**
 * A "required" answer read as it streams: the call opens (its id and name) once the tool is
 * named, then its arguments come as they are written, all but what may be the object's own
 * closing brace, held until the end says whether it was.
 */
function requiredCallStream(jobId: string): ToolCallStream {
  let text = "";
  let named: { name: string; from: number } | undefined;
  let sent = 0;
  const part = (fields: Partial<CallPart>): StreamedAnswer => ({
    content: null,
    parts: [{ index: 0, arguments: "", ...fields }],
  });
  const none: StreamedAnswer = { content: null, parts: [] };
  return {
    push(piece) {
      text += piece;
      const open = named === undefined;
      if (!named) {
        const head = REQUIRED_HEAD.exec(text);
        if (!head) return none;
        named = { name: head[1] ?? "", from: head[0].length };
        sent = named.from;
      }
      // what could still be the closing of the object is held
      const upTo = text.length - (/[\s}]*$/.exec(text)?.[0].length ?? 0);
      const delta = upTo > sent ? text.slice(sent, upTo) : "";
      sent = Math.max(sent, upTo);
      if (open) return part({ id: toolCallId(jobId), name: named.name, arguments: delta });
      return delta ? part({ arguments: delta }) : none;
    },
    end() {
      const call = requiredCallOf(text);
      if (!named) {
        // cut short before a tool was named: the text as the call, as the whole answer has it
        named = { name: "", from: 0 };
        return part({ id: toolCallId(jobId), name: "", arguments: text, done: true });
      }
      const whole = call?.arguments ?? text.slice(named.from);
      const rest = whole.slice(sent - named.from);
      return part({ arguments: rest, done: true });
    },
    get called() {
      return named !== undefined;
    },
  };
}
