import { FerryError } from "@ferry/protocol";
import type { ChatCompletionRequest, Tool } from "./schemas.js";

/**
 * What a chat asked of its tools, kept in its job's meta: the answer is a call of the function
 * `name` (OpenAI's named `tool_choice`, or `required` with one tool), or of whichever function
 * the model picks (`required` with several: the answer is `{"name", "parameters"}`, vLLM's form).
 */
export type ToolCallAsk = { tool_call: "named"; name: string } | { tool_call: "required" };

/** A function without parameters takes an empty object. */
const NO_PARAMETERS = { type: "object", properties: {} };

/**
 * A chat's tool choice as guided decoding: the JSON schema its answer must meet, and how the
 * answer is read back as a call. Forced calls only (as vLLM guides them): `auto`, where the
 * model chooses between text and a call, needs a parser for the model's own call format.
 */
export function toolChoice(
  body: Pick<ChatCompletionRequest, "tools" | "tool_choice" | "stream">,
): { schema: Record<string, unknown>; ask: ToolCallAsk } | undefined {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  if (choice === "none") return undefined;
  if (tools.length === 0)
    throw new FerryError("INVALID_INPUT", "tool_choice names a tool, but no tools were given");
  if (choice === "auto")
    throw new FerryError(
      "INVALID_INPUT",
      'tool_choice "auto" (the model choosing between text and a call) needs a parser of the model\'s own call format, which Ferry does not have: give tool_choice "required" or {"type": "function", "function": {"name": ...}}, or "none"',
    );
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

/**
 * The call an answer made (its text the guided JSON), or undefined when the job asked for
 * none. An answer cut short (`length`) keeps its partial arguments, as OpenAI's does.
 */
export function toolCallOf(meta: unknown, jobId: string, text: string): ToolCall | undefined {
  const ask = meta as Partial<ToolCallAsk> | undefined;
  if (ask?.tool_call === "named")
    return {
      id: toolCallId(jobId),
      type: "function",
      function: { name: ask.name ?? "", arguments: text },
    };
  if (ask?.tool_call !== "required") return undefined;
  try {
    const { name, parameters } = JSON.parse(text) as { name: string; parameters: unknown };
    return {
      id: toolCallId(jobId),
      type: "function",
      function: { name, arguments: JSON.stringify(parameters) },
    };
  } catch {
    return { id: toolCallId(jobId), type: "function", function: { name: "", arguments: text } };
  }
}
