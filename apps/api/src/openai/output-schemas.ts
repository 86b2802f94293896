import { z } from "@hono/zod-openapi";
import { toolCallSchema } from "./schemas.js";

const usage = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  /** Prompt tokens read from the worker's prefix cache rather than computed (OpenAI's field). */
  prompt_tokens_details: z.object({ cached_tokens: z.number() }).optional(),
});

/**
 * vLLM's `prompt_logprobs`: per prompt token (the first `null`: nothing came before it), the
 * token's and its likeliest alternatives' log probability, rank and text, keyed by token id.
 */
const promptLogprobsSchema = z.array(
  z
    .record(
      z.string(),
      z.object({
        logprob: z.number(),
        rank: z.number().int().nullable(),
        decoded_token: z.string(),
      }),
    )
    .nullable(),
);
export type PromptLogprobs = z.infer<typeof promptLogprobsSchema>;

/** A completion's log probabilities in OpenAI's legacy shape, token by token. */
const completionLogprobsSchema = z.object({
  tokens: z.array(z.string()),
  /** An echoed prompt's first token has none: nothing came before it. */
  token_logprobs: z.array(z.number().nullable()),
  /** The likeliest alternatives' and the sampled token's, token text to log probability. */
  top_logprobs: z.array(z.record(z.string(), z.number()).nullable()),
  /** Where each token's text begins in the completion's text (characters). */
  text_offset: z.array(z.number().int()),
});
export type CompletionLogprobs = z.infer<typeof completionLogprobsSchema>;

const chatTokenText = { token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()) };

/** A chat answer's log probabilities in OpenAI's shape. */
const chatLogprobsSchema = z.object({
  content: z.array(z.object({ ...chatTokenText, top_logprobs: z.array(z.object(chatTokenText)) })),
  refusal: z.null(),
});
export type ChatLogprobs = z.infer<typeof chatLogprobsSchema>;

export const completionResponseSchema = z
  .object({
    id: z.string(),
    object: z.literal("text_completion"),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        text: z.string(),
        index: z.number().int(),
        logprobs: completionLogprobsSchema.nullable(),
        finish_reason: z.enum(["stop", "length"]).nullable(),
        /** vLLM's, when asked for (`prompt_logprobs`). */
        prompt_logprobs: promptLogprobsSchema.optional(),
      }),
    ),
    usage: usage.optional(),
  })
  .openapi("Completion");
export type CompletionResponse = z.infer<typeof completionResponseSchema>;

export const modelCardSchema = z
  .object({
    id: z.string(),
    object: z.literal("model"),
    created: z.number().int(),
    owned_by: z.string(),
    /** vLLM's name for the context window, in tokens (generators). */
    max_model_len: z.number().int().optional(),
  })
  .openapi("Model");

export const modelListSchema = z
  .object({ object: z.literal("list"), data: z.array(modelCardSchema) })
  .openapi("ModelList");

export const chatCompletionResponseSchema = z
  .object({
    id: z.string(),
    object: z.literal("chat.completion"),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({
          role: z.literal("assistant"),
          /** null when the answer is a call (`tool_calls`). */
          content: z.string().nullable(),
          tool_calls: z.array(toolCallSchema).optional(),
        }),
        logprobs: chatLogprobsSchema.nullable(),
        finish_reason: z.enum(["stop", "length", "tool_calls"]),
      }),
    ),
    usage: usage,
    /** vLLM's, when asked for (`prompt_logprobs`): the rendered chat's tokens. */
    prompt_logprobs: promptLogprobsSchema.optional(),
  })
  .openapi("ChatCompletion");
export type ChatCompletionResponse = z.infer<typeof chatCompletionResponseSchema>;
