import { z } from "@hono/zod-openapi";
import { capped, TOOLS_TOO_LARGE, tokenIdList, toolsWithin, unsupported } from "../http/schemas.js";
import { chatMessages, chatTemplateFields, toolSchema } from "./schemas.js";

/**
 * vLLM's `/tokenize`: a prompt as `/v1/completions` reads it, or messages as
 * `/v1/chat/completions` renders them (the chat's fields that shape its prompt included).
 */
export const tokenizeRequestSchema = z
  .object({
    /** The text model; may be left out where the server has one. */
    model: z.string().nullish(),
    prompt: z.string().optional(),
    messages: chatMessages.optional(),
    tools: z.array(toolSchema).max(128).nullish().refine(toolsWithin, TOOLS_TOO_LARGE),
    ...chatTemplateFields,
    /** Special tokens the tokenizer's post-processor adds (a BOS...); vLLM's defaults: a prompt true, a chat false. */
    add_special_tokens: z.boolean().nullish(),
    /** Each token also as its vocabulary writes it. */
    return_token_strs: z.boolean().nullish(),
    chat_template: unsupported("chat_template"),
    mm_processor_kwargs: unsupported("mm_processor_kwargs"),
  })
  .superRefine((body, ctx) => {
    if ((body.prompt === undefined) === (body.messages === undefined))
      ctx.addIssue({ code: "custom", message: "Give either prompt or messages" });
    const chatOnly = [
      "tools",
      "add_generation_prompt",
      "continue_final_message",
      "chat_template_kwargs",
    ];
    if (body.prompt !== undefined)
      for (const field of chatOnly)
        if (body[field as keyof typeof body] != null)
          ctx.addIssue({
            code: "custom",
            path: [field],
            message: `${field} applies to messages, not a prompt`,
          });
  })
  .openapi("TokenizeRequest");
export type TokenizeRequest = z.infer<typeof tokenizeRequestSchema>;

export const tokenizeResponseSchema = z
  .object({
    count: z.number().int(),
    /** The model's context window in tokens (null where model.json does not say it). */
    max_model_len: z.number().int().nullable(),
    tokens: z.array(z.number().int()),
    /** With `return_token_strs`: each token as its vocabulary writes it; else null. */
    token_strs: z.array(z.string()).nullable(),
  })
  .openapi("TokenizeResponse");

export const detokenizeRequestSchema = z
  .object({ model: z.string().nullish(), tokens: capped(tokenIdList()) })
  .openapi("DetokenizeRequest");
export type DetokenizeRequest = z.infer<typeof detokenizeRequestSchema>;

export const detokenizeResponseSchema = z
  .object({ prompt: z.string() })
  .openapi("DetokenizeResponse");
