import { MAX_LOGPROBS, prioritySchema, timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import {
  callerTagSchema,
  conversationIdSchema,
  conversationWithin,
  metadataSchema,
  named,
  TOOLS_TOO_LARGE,
  toolDescriptionSchema,
  toolsWithin,
  unsupported,
} from "../http/schemas.js";
import { functionParametersSchema, MAX_MESSAGES } from "./schemas.js";
import { streamOptionsStreamed } from "./stream-options.js";

/** Content parts of a message Ferry reads: text in, and an earlier answer's text. */
const TEXT_PARTS = new Set(["input_text", "output_text"]);

const contentPart = z
  .object({ type: z.string(), text: z.string().optional() })
  .superRefine((part, ctx) => {
    if (!TEXT_PARTS.has(part.type))
      ctx.addIssue({
        code: "custom",
        message: `content of type ${named(part.type)} is not supported by this server (input_text and output_text are)`,
      });
    else if (part.text === undefined)
      ctx.addIssue({ code: "custom", message: `${part.type} needs its text` });
  });

/** What each kind of input item Ferry reads must carry. */
const ITEM_FIELDS: Record<string, readonly string[]> = {
  message: ["role", "content"],
  function_call: ["call_id", "name", "arguments"],
  function_call_output: ["call_id", "output"],
};

/**
 * An item of the conversation: a message, or a function call an earlier answer made and its
 * output, which the client sends back.
 */
const inputItem = z
  .object({
    type: z.string().optional(),
    role: z.enum(["user", "assistant", "system", "developer"]).optional(),
    content: z.union([z.string(), z.array(contentPart)]).optional(),
    call_id: conversationIdSchema.optional(),
    name: conversationIdSchema.optional(),
    arguments: z.string().optional(),
    output: z.string().optional(),
  })
  .superRefine((item, ctx) => {
    const type = item.type ?? "message";
    const fields = ITEM_FIELDS[type];
    if (!fields)
      ctx.addIssue({
        code: "custom",
        message: `input items of type ${named(type)} are not supported by this server (message, function_call and function_call_output are)`,
      });
    else
      for (const field of fields)
        if (item[field as keyof typeof item] === undefined)
          ctx.addIssue({ code: "custom", message: `a ${type} item needs its ${field}` });
  });

/** A function the model may be made to call (the Responses API's flat form). */
const functionTool = z
  .object({
    type: z.string(),
    name: z.string().optional(),
    description: toolDescriptionSchema.nullish(),
    parameters: functionParametersSchema.nullish(),
    strict: z.boolean().nullish(),
  })
  .superRefine((tool, ctx) => {
    if (tool.type !== "function")
      ctx.addIssue({
        code: "custom",
        message: `tools of type ${named(tool.type)} are not supported by this server (function tools are)`,
      });
    else if (tool.name === undefined)
      ctx.addIssue({ code: "custom", message: "a function tool needs its name" });
  });

/** `text.format`: OpenAI's structured outputs, flat (`name` and `schema` beside `type`). */
const textFormat = z.discriminatedUnion(
  "type",
  [
    z.object({ type: z.literal("text") }),
    z.object({ type: z.literal("json_object") }),
    z.object({
      type: z.literal("json_schema"),
      name: z.string(),
      schema: z.record(z.string(), z.unknown()),
      description: z.string().optional(),
      strict: z.boolean().nullish(),
    }),
  ],
  { error: "text.format type must be text, json_object or json_schema" },
);

/**
 * OpenAI's Responses API request, as far as a text model answers it: messages in (a string,
 * or message items of text), instructions, sampling, structured outputs, a conversation
 * continued by `previous_response_id`. What would change the answer and Ferry lacks (tools,
 * background mode, reasoning effort, stored prompts, conversations...) is refused by name.
 */
export const responsesRequestSchema = z
  .object({
    model: z.string(),
    // counted before the union reads them: its every branch would read each item
    input: conversationWithin(z.union([z.string(), z.array(inputItem).min(1)]), {
      maxItems: MAX_MESSAGES,
      tooMany: `input: at most ${MAX_MESSAGES} items`,
    }),
    instructions: z.string().nullish(),
    previous_response_id: z.string().nullish(),
    max_output_tokens: z.number().int().positive().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    stream: z.boolean().nullish(),
    /** Whether the response may be read back (GET, previous_response_id): default true. */
    store: z.boolean().nullish(),
    text: z
      .object({
        format: textFormat.optional(),
        verbosity: unsupported("text.verbosity", "medium"),
      })
      .nullish(),
    metadata: metadataSchema.nullish(),
    user: callerTagSchema.nullish(),
    tool_choice: z
      .union([
        z.enum(["none", "auto", "required"]),
        z.object({ type: z.literal("function"), name: z.string() }),
      ])
      .nullish(),
    tools: z.array(functionTool).max(128).nullish().refine(toolsWithin, TOOLS_TOO_LARGE),
    parallel_tool_calls: z.boolean().nullish(),
    max_tool_calls: z.number().int().nullish(),
    truncation: unsupported("truncation", "disabled"),
    /** More to include in the answer: of OpenAI's, the output text's log probabilities. */
    include: z
      .array(
        z.string().refine((what) => what === "message.output_text.logprobs", {
          error: (issue) =>
            `include ${named(String(issue.input))} is not supported by this server (message.output_text.logprobs is)`,
        }),
      )
      .nullish(),
    /** With the log probabilities, this many likeliest alternatives of each token. */
    top_logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
    reasoning: unsupported("reasoning", {}, { effort: null }, { effort: null, summary: null }),
    /** Queued as an async job and answered at once (`queued`); read back or cancelled later. */
    background: z.boolean().nullish(),
    conversation: unsupported("conversation"),
    prompt: unsupported("prompt"),
    // routing and accounting hints that do not change the answer
    service_tier: z.string().nullish(),
    prompt_cache_key: callerTagSchema.nullish(),
    safety_identifier: callerTagSchema.nullish(),
    stream_options: z.object({ include_obfuscation: z.boolean().optional() }).nullish(),
    // Ferry's own, as on every route
    priority: prioritySchema.optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .superRefine(streamOptionsStreamed)
  .openapi("ResponseCreateRequest");
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
