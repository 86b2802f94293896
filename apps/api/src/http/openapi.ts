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

export { json };
