import { z } from "@hono/zod-openapi";
import { openAiErrorSchema, v2ErrorSchema } from "./schemas.js";

const json = <T>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description,
});

/** The error responses every OpenAI-shaped route may give, for the OpenAPI document. */
export const openAiErrors = {
  400: json(openAiErrorSchema, "Invalid input; the message names the problem"),
  404: json(openAiErrorSchema, "Unknown model, version or job"),
  429: json(openAiErrorSchema, "Queue full; retry after Retry-After seconds"),
  503: json(openAiErrorSchema, "Redis or the model is unavailable"),
  504: json(openAiErrorSchema, "Deadline passed before the request ran; it was not computed"),
} as const;

/** The same for KServe v2 routes, in KServe's `{"error": "..."}` shape. */
export const v2Errors = {
  400: json(v2ErrorSchema, "Invalid input; the message names the problem"),
  404: json(v2ErrorSchema, "Unknown model or version"),
  429: json(v2ErrorSchema, "Queue full; retry after Retry-After seconds"),
  503: json(v2ErrorSchema, "Redis or the model is unavailable"),
  504: json(v2ErrorSchema, "Deadline passed before the request ran; it was not computed"),
} as const;

/**
 * The Idempotency-Key header of the routes that create something, and the answers it adds
 * (draft-ietf-httpapi-idempotency-key-header).
 */
export const idempotencyHeaders = z.object({
  "idempotency-key": z.string().optional().openapi({
    description:
      "Makes a retry safe: the first request's answer is replayed (Idempotent-Replayed: true) for IDEMPOTENCY_TTL_S to any request with the same key from the same API key; the same key with another payload is a 422, and while the first is still being accepted a 409. 1-255 characters, bare or quoted.",
  }),
});
export const idempotencyErrors = {
  409: json(openAiErrorSchema, "A request with this Idempotency-Key is still being accepted"),
  422: json(openAiErrorSchema, "This Idempotency-Key was used with another payload"),
} as const;

export { json };
