import { timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import { unsupported } from "./schemas.js";

/** Content parts of a message Ferry reads: text in, and an earlier answer's text. */
const TEXT_PARTS = new Set(["input_text", "output_text"]);

const contentPart = z
  .object({ type: z.string(), text: z.string().optional() })
  .superRefine((part, ctx) => {
    if (!TEXT_PARTS.has(part.type))
      ctx.addIssue({
        code: "custom",
        message: `content of type ${part.type} is not supported by this server (input_text and output_text are)`,
      });
    else if (part.text === undefined)
      ctx.addIssue({ code: "custom", message: `${part.type} needs its text` });
  });

/** A message of the conversation (the only kind of input item Ferry reads). */
const inputItem = z
  .object({
    type: z.string().optional(),
    role: z.enum(["user", "assistant", "system", "developer"]).optional(),
    content: z.union([z.string(), z.array(contentPart)]).optional(),
  })
  .superRefine((item, ctx) => {
    if ((item.type ?? "message") !== "message")
      ctx.addIssue({
        code: "custom",
        message: `input items of type ${item.type} are not supported by this server (messages are)`,
      });
    else if (item.role === undefined || item.content === undefined)
      ctx.addIssue({ code: "custom", message: "a message needs its role and content" });
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
    input: z.union([z.string(), z.array(inputItem).min(1)]),
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
    metadata: z.record(z.string(), z.string()).nullish(),
    user: z.string().nullish(),
    tool_choice: unsupported("tool_choice", "none", "auto"),
    tools: unsupported("tools", []),
    parallel_tool_calls: z.boolean().nullish(),
    max_tool_calls: z.number().int().nullish(),
    truncation: unsupported("truncation", "disabled"),
    include: unsupported("include", []),
    top_logprobs: unsupported("top_logprobs", 0),
    reasoning: unsupported("reasoning", {}, { effort: null }, { effort: null, summary: null }),
    background: unsupported("background", false),
    conversation: unsupported("conversation"),
    prompt: unsupported("prompt"),
    // routing and accounting hints that do not change the answer
    service_tier: z.string().nullish(),
    prompt_cache_key: z.string().nullish(),
    safety_identifier: z.string().nullish(),
    stream_options: z.object({ include_obfuscation: z.boolean().optional() }).nullish(),
    // Ferry's own, as on every route
    priority: z.number().int().min(1).max(10).optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .openapi("ResponseCreateRequest");
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
