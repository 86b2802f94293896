import { MAX_GRAMMAR_LENGTH, MAX_PATTERN_LENGTH } from "@ferry/guided";
import {
  MAX_JSON_DEPTH,
  MAX_LOGPROBS,
  nestsWithin,
  prioritySchema,
  timeoutMsSchema,
} from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import {
  callerTagSchema,
  capped,
  conversationIdSchema,
  conversationWithin,
  named,
  TOOLS_TOO_LARGE,
  tokenIdList,
  toolDescriptionSchema,
  toolsWithin,
  unsupported,
} from "../http/schemas.js";
import { jsonSchema } from "./json-schema-field.js";
import { streamOptionsStreamed } from "./stream-options.js";

/** Most choices one request may ask for (prompts times `n`): each is a job on the queue. */
export const MAX_CHOICES = 64;

/** A prompt already tokenized (OpenAI, vLLM): the model's token ids, as they are. */
const tokenIds = capped(tokenIdList(1));

/** A stop sequence: matched against every token's text, so it is kept short; never empty (vLLM's rule: it would stop at once). */
const stopString = z.string().min(1, "stop cannot contain an empty string").max(256);

/** vLLM's `guided_choice`: the strings a completion may be. */
const guidedChoices = z.array(z.string().min(1).max(1024)).min(1).max(256);

/**
 * OpenAI's `response_format`: text, JSON mode (`json_object`: the answer is one JSON object)
 * or structured outputs (`json_schema`: a JSON text its schema accepts).
 */
const responseFormat = z
  .discriminatedUnion(
    "type",
    [
      z.object({ type: z.literal("text") }),
      z.object({ type: z.literal("json_object") }),
      z.object({
        type: z.literal("json_schema"),
        json_schema: z.object({
          name: z.string(),
          schema: jsonSchema,
          description: z.string().optional(),
          strict: z.boolean().nullish(),
        }),
      }),
    ],
    { error: "response_format type must be text, json_object or json_schema" },
  )
  .nullish();

/**
 * vLLM's `guided_regex`: a regular expression the completion matches whole (JavaScript's syntax
 * checked here; a worker refuses what its matcher lacks: lookaround, backreferences).
 */
const guidedRegex = z
  .string()
  .min(1)
  .max(MAX_PATTERN_LENGTH)
  .refine(
    (pattern) => {
      try {
        new RegExp(pattern);
        return true;
      } catch {
        return false;
      }
    },
    { message: "not a valid regular expression" },
  );

/** The kinds of vLLM's `structured_outputs` Ferry guides by. */
const STRUCTURED_KINDS = new Set(["choice", "regex", "json", "json_object", "grammar"]);

/** vLLM's `guided_grammar`: an EBNF grammar (XGrammar's dialect, GBNF-like) the completion is a text of. */
const guidedGrammar = z.string().min(1).max(MAX_GRAMMAR_LENGTH);

/** What completions and chats share: sampling, stopping, streaming. */
const sampling = {
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([stopString, z.array(stopString).max(4)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z
    .object({
      include_usage: z.boolean().nullish(),
      /** vLLM's: with include_usage, every chunk carries the usage so far. */
      continuous_usage_stats: z.boolean().nullish(),
    })
    .nullish(),
  // OpenAI's logit changes, then vLLM's: applied by the worker before every draw, greedy too
  logit_bias: z.record(z.string().regex(/^\d+$/), z.number().min(-100).max(100)).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().gt(0).max(10).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  /** vLLM's: no end of text, stop token or stop string before this many tokens. */
  min_tokens: z.number().int().min(0).nullish(),
  /** vLLM's: token ids that end the completion as the end-of-text token does. */
  stop_token_ids: z.array(z.number().int().min(0)).max(64).nullish(),
  /** vLLM's: only the prompt's last this many tokens are read (left truncation). */
  truncate_prompt_tokens: z.number().int().min(1).nullish(),
  /**
   * vLLM's: a text prompt gets the special tokens its tokenizer's post-processor adds (a BOS);
   * default true for a completion, false for a chat (its template writes them).
   */
  add_special_tokens: z.boolean().nullish(),
  /** vLLM's: the text ends after the stop string that ended it (OpenAI's drops it). */
  include_stop_str_in_output: z.boolean().nullish(),
  /** vLLM's: words the completion may not contain. */
  bad_words: z.array(z.string().min(1).max(256)).max(64).nullish(),
  /** vLLM's: only these token ids can be drawn (no vocabulary has more than 262,144: Gemma's). */
  allowed_token_ids: capped(tokenIdList(1))
    .nullish()
    .openapi({ type: ["array", "null"], items: { type: "integer", minimum: 0 }, minItems: 1 }),
  /**
   * vLLM's: every prompt token's log probability (the first's null), its rank and this many
   * likeliest alternatives, keyed by token id; not in a stream (vLLM's rule).
   */
  prompt_logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
  // vLLM's fields that would change the answer and that Ferry does not implement: refused by
  // name, never dropped
  use_beam_search: unsupported("use_beam_search", false),
  guided_whitespace_pattern: unsupported("guided_whitespace_pattern", null),
  skip_special_tokens: unsupported("skip_special_tokens", true),
  spaces_between_special_tokens: unsupported("spaces_between_special_tokens", true),
  return_tokens_as_token_ids: unsupported("return_tokens_as_token_ids", false),
  length_penalty: unsupported("length_penalty", 1),
  prompt_embeds: unsupported("prompt_embeds"),
  logits_processors: unsupported("logits_processors"),
  /** vLLM's guided decoding: the completion is exactly one of these strings. */
  guided_choice: guidedChoices.nullish(),
  /** vLLM's guided decoding: the completion matches this regular expression, whole. */
  guided_regex: guidedRegex.nullish(),
  /** vLLM's guided decoding: the completion is a JSON text this schema accepts. */
  guided_json: jsonSchema.nullish(),
  /** vLLM's guided decoding: the completion is a text of this EBNF grammar. */
  guided_grammar: guidedGrammar.nullish(),
  /** vLLM's newer form of guided decoding: of its kinds `choice`, `regex`, `json`, `json_object` and `grammar`. */
  structured_outputs: z
    .object({
      choice: guidedChoices.optional(),
      regex: guidedRegex.optional(),
      json: jsonSchema.optional(),
      json_object: z.boolean().optional(),
      grammar: guidedGrammar.optional(),
    })
    .catchall(z.unknown())
    .superRefine((value, ctx) => {
      for (const [key, v] of Object.entries(value))
        if (!STRUCTURED_KINDS.has(key) && v !== null && v !== undefined && v !== false)
          ctx.addIssue({
            code: "custom",
            message: `structured_outputs.${named(key)} is not supported by this server (of its kinds, choice, regex, json, json_object and grammar are)`,
          });
    })
    .nullish(),
  response_format: responseFormat,
  // choices per prompt, each a job of its own (OpenAI, vLLM); with a seed, the j-th draws
  // with seed + j
  n: z.number().int().min(1).max(MAX_CHOICES).nullish(),
};

export const completionRequestSchema = z
  .object({
    model: z.string(),
    // several prompts are several completions, answered together (OpenAI, vLLM; LangChain's
    // completion model always sends a list); a prompt may come as its token ids
    // token ids tried before texts: a long list is ids, and each element a schema tries as
    // what it is not costs an issue
    prompt: capped(
      z.union(
        [
          z.string(),
          tokenIds,
          z.array(z.string()).min(1).max(MAX_CHOICES),
          z.array(tokenIds).min(1).max(MAX_CHOICES),
        ],
        {
          error: `prompt must be a string, a list of token ids, or a list of 1 to ${MAX_CHOICES} of either`,
        },
      ),
    ),
    max_tokens: z.number().int().positive().nullish(),
    ...sampling,
    // each completion token's log probability, with that many likeliest alternatives
    logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
    // OpenAI fields Ferry does not implement: refused by name rather than silently ignored
    /** The completion's text begins with its prompt's (with `logprobs`, the prompt's too). */
    echo: z.boolean().nullish(),
    best_of: unsupported("best_of", 1),
    suffix: unsupported("suffix", null),
    /** vLLM's extension: generate exactly max_tokens, past the end-of-text token. */
    ignore_eos: z.boolean().nullish(),
    priority: prioritySchema.optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .superRefine(streamOptionsStreamed)
  .openapi("CompletionRequest");
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

/** Keywords that would let a function's arguments be something other than an object. */
const NOT_AN_OBJECT_AT_ROOT = ["anyOf", "oneOf", "allOf", "$ref", "enum", "const", "not"];

/**
 * A function's parameters: a JSON schema of an object, as OpenAI requires (a call's arguments
 * are an object); one that names no type is read as an object's.
 */
export const functionParametersSchema = z
  .record(z.string(), z.unknown())
  .refine(
    (schema) =>
      (schema.type === undefined || schema.type === "object") &&
      !NOT_AN_OBJECT_AT_ROOT.some((keyword) => keyword in schema),
    {
      message: `a function's parameters are a JSON schema of an object (type "object"; no ${NOT_AN_OBJECT_AT_ROOT.join(", ")} at its root)`,
    },
  );

/** A function the model may be made to call: its name and its parameters' JSON schema. */
export const toolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z
      .string()
      .regex(/^[a-zA-Z0-9_-]{1,64}$/, "a function's name is 1 to 64 of a-z A-Z 0-9 _ -"),
    description: toolDescriptionSchema.optional(),
    parameters: functionParametersSchema.optional(),
    strict: z.boolean().nullish(),
  }),
});
export type Tool = z.infer<typeof toolSchema>;

/** A call an answer made: the function's name and its arguments' JSON text. */
export const toolCallSchema = z.object({
  id: conversationIdSchema,
  type: z.literal("function"),
  function: z.object({ name: conversationIdSchema, arguments: z.string() }),
});

/**
 * Most messages one chat may send: counted before any template renders them (200,000 one-letter
 * messages took a template 1.5 s of the API's loop each).
 */
export const MAX_MESSAGES = 2_048;

/** A part of a chat message's content: text (an image's, audio's or file's is refused by name). */
const chatContentPart = z
  .object({ type: z.string(), text: z.string().optional() })
  .superRefine((part, ctx) => {
    if (part.type !== "text")
      ctx.addIssue({
        code: "custom",
        message: `content of type ${named(part.type)} is not supported by this server (text is)`,
      });
    else if (part.text === undefined)
      ctx.addIssue({ code: "custom", message: "a text part needs its text" });
  })
  .transform((part) => ({ type: "text" as const, text: part.text ?? "" }));

/** A chat message's content: a string, or OpenAI's array of text parts. */
const chatContent = z.union([z.string(), z.array(chatContentPart)]);

export const chatMessages = conversationWithin(
  z
    .array(
      z.object({
        role: z.enum(["system", "developer", "user", "assistant", "tool"]),
        // an assistant's turn that called tools may have no text
        content: chatContent.nullish(),
        name: conversationIdSchema.optional(),
        /** An assistant's calls, as an earlier answer gave them. */
        tool_calls: z.array(toolCallSchema).optional(),
        /** A tool's answer: the call it answers. */
        tool_call_id: conversationIdSchema.optional(),
      }),
    )
    .min(1, "messages must hold at least one message")
    .max(MAX_MESSAGES, `messages: at most ${MAX_MESSAGES} messages`)
    .superRefine((messages, ctx) => {
      // a tool's answer names the call it answers (OpenAI's rule); templates index by it
      const orphan = messages.findIndex((m) => m.role === "tool" && !m.tool_call_id);
      if (orphan >= 0)
        ctx.addIssue({
          code: "custom",
          path: [orphan, "tool_call_id"],
          message: "a tool message needs the tool_call_id of the call it answers",
        });
    }),
  { maxItems: MAX_MESSAGES, tooMany: `messages: at most ${MAX_MESSAGES} messages` },
);

/** The JSON a chat template's extra arguments may take: flags and a few values. */
const MAX_TEMPLATE_KWARGS_JSON = 65_536;
const MAX_TEMPLATE_KWARGS_ENTRIES = 4_096;

/** vLLM's fields that say how the chat template renders the messages. */
export const chatTemplateFields = {
  /** Ends the prompt where the assistant's turn begins (default); false ends it after the last message. */
  add_generation_prompt: z.boolean().nullish(),
  /** Leaves the last message open, for the model to continue it (needs add_generation_prompt false). */
  continue_final_message: z.boolean().nullish(),
  /** More variables for the template (e.g. Qwen 3's `enable_thinking`). */
  // measured before the schema reads a key: a few flags (enable_thinking...), where 400,000
  // keys had held the API's loop 1.7 s
  chat_template_kwargs: z.preprocess((kwargs, ctx) => {
    if (typeof kwargs !== "object" || kwargs === null) return kwargs;
    if (
      nestsWithin(kwargs, MAX_JSON_DEPTH, MAX_TEMPLATE_KWARGS_ENTRIES) &&
      JSON.stringify(kwargs).length <= MAX_TEMPLATE_KWARGS_JSON
    )
      return kwargs;
    ctx.addIssue({
      code: "custom",
      message: `nested at most ${MAX_JSON_DEPTH} levels, at most ${MAX_TEMPLATE_KWARGS_ENTRIES} values and ${MAX_TEMPLATE_KWARGS_JSON} characters of JSON`,
    });
    return z.NEVER;
  }, z.record(z.string(), z.unknown()).nullish()),
};

export const chatCompletionRequestSchema = z
  .object({
    model: z.string(),
    messages: chatMessages,
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    ...sampling,
    user: callerTagSchema.nullish(),
    // each completion token's log probability, with top_logprobs likeliest alternatives
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(MAX_LOGPROBS).nullish(),
    /**
     * Functions the model may call: made to (`tool_choice` one by name, or `required`), or as it
     * chooses (`auto`, for a model whose model.json names its call format's parser).
     */
    tools: z.array(toolSchema).max(128).nullish().refine(toolsWithin, TOOLS_TOO_LARGE),
    tool_choice: z
      .union([
        z.enum(["none", "auto", "required"]),
        z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
      ])
      .nullish(),
    /** Whether several calls may come in one answer: a forced call is one; `auto` reads what the model wrote. */
    parallel_tool_calls: z.boolean().nullish(),
    ...chatTemplateFields,
    // vLLM's chat fields Ferry lacks: refused by name rather than silently ignored
    echo: unsupported("echo", false),
    chat_template: unsupported("chat_template"),
    documents: unsupported("documents"),
    // OpenAI's, for models that reason or search: this server has none
    reasoning_effort: unsupported("reasoning_effort"),
    verbosity: unsupported("verbosity", "medium"),
    web_search_options: unsupported("web_search_options"),
    // OpenAI's deprecated function calling: its successor, `tools`, is served
    functions: unsupported("functions"),
    function_call: unsupported("function_call", "none"),
    modalities: unsupported("modalities", ["text"]),
    audio: unsupported("audio", null),
    ignore_eos: z.boolean().nullish(),
    priority: prioritySchema.optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .superRefine(streamOptionsStreamed)
  .openapi("ChatCompletionRequest");
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
