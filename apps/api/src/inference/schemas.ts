import { prioritySchema, timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";

/**
 * A non-empty array of finite numbers, checked in one loop: the hot route's body is mostly
 * this array, and a schema per element costs more than the rest of the request's parsing.
 */
const featureVector = z
  .custom<number[]>(
    (value) => {
      if (!Array.isArray(value) || value.length === 0) return false;
      for (let k = 0; k < value.length; k++) {
        const v: unknown = value[k];
        if (typeof v !== "number" || !Number.isFinite(v)) return false;
      }
      return true;
    },
    { message: "expected a non-empty array of finite numbers" },
  )
  .openapi({
    type: "array",
    items: { type: "number" },
    minItems: 1,
    example: [0, 0, 5, 13, 9, 1, 0, 0],
  });

export const predictBodySchema = z
  .object({
    features: featureVector,
    /** Deadline for this request, in ms; past it the request is never computed (504). */
    timeout_ms: timeoutMsSchema.optional(),
    priority: prioritySchema.optional(),
    /** false skips the prediction cache for this request (as `Cache-Control: no-cache`). */
    cache: z.boolean().optional(),
  })
  .openapi("PredictRequest");
export type PredictBody = z.infer<typeof predictBodySchema>;

export const predictResponseSchema = z
  .object({
    prediction: z.number().int(),
    confidence: z.number(),
    latency_ms: z.number(),
    model_version: z.string(),
    source: z.enum(["model", "cache", "fallback_cache", "fallback_default"]),
    scores: z
      .array(z.number())
      .optional()
      .openapi({ description: "Every class's probability (softmax of the logits)" }),
  })
  .openapi("PredictResponse");
