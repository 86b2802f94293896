import { prioritySchema, timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import { capped, tokenIdList } from "../http/schemas.js";

/**
 * OpenAI's embeddings request, with vLLM's `truncate_prompt_tokens` and Ferry's call fields.
 * `input` is a text, texts, one input's token ids, or several inputs' token ids; emptiness and
 * the model's budgets are checked by the service, which knows the model.
 */
export const embeddingsRequestSchema = z
  .object({
    model: z.string(),
    // token ids tried before texts: a long list is ids, and each element a schema tries as
    // what it is not costs an issue
    input: capped(
      z.union([z.string(), tokenIdList(), z.array(z.string()), z.array(capped(tokenIdList()))], {
        error:
          "input must be a string, an array of strings, an array of token ids, or an array of arrays of token ids",
      }),
    ),
    /** `base64`: each vector as the base64 of its little-endian float32 values (the openai client's default). */
    encoding_format: z.enum(["float", "base64"]).default("float"),
    /** The first that many values of each vector, normalized again (Matryoshka models only). */
    dimensions: z.number().int().optional(),
    user: z.string().optional(),
    /** vLLM's: each input's last that many tokens are read (-1: as many as the model takes). */
    truncate_prompt_tokens: z.number().int().min(-1).optional(),
    priority: prioritySchema.optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .openapi("EmbeddingsRequest");
export type EmbeddingsRequest = z.infer<typeof embeddingsRequestSchema>;

export const embeddingsResponseSchema = z
  .object({
    object: z.literal("list"),
    data: z.array(
      z.object({
        object: z.literal("embedding"),
        index: z.number().int(),
        embedding: z.union([z.array(z.number()), z.string()]).openapi({
          description: "The vector; with encoding_format base64, its float32 values as base64",
        }),
      }),
    ),
    model: z.string(),
    usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
  })
  .openapi("EmbeddingsResponse");
export type EmbeddingsResponse = z.infer<typeof embeddingsResponseSchema>;
