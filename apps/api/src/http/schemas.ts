import { z } from "@hono/zod-openapi";

export const v2ErrorSchema = z.object({ error: z.string() }).openapi("KServeError");
export const openAiErrorSchema = z
  .object({
    error: z.object({ message: z.string(), type: z.string(), code: z.string().nullable() }),
  })
  .openapi("Error");

/** A field Ferry does not implement: absent, null or its no-op value, else a 400 naming it. */
export function unsupported(field: string, ...noop: unknown[]) {
  return z
    .unknown()
    .optional()
    .superRefine((value, ctx) => {
      // structured no-ops (response_format {type: "text"}, modalities ["text"]) by value
      const json = JSON.stringify(value);
      if (value === undefined || value === null || noop.some((n) => JSON.stringify(n) === json))
        return;
      ctx.addIssue({ code: "custom", message: `${field} is not supported by this server` });
    });
}
