import { z } from "@hono/zod-openapi";

export const healthSchema = z
  .object({
    status: z.enum(["healthy", "degraded"]),
    redis: z.enum(["up", "down"]),
    models: z.record(z.string(), z.object({ ready: z.boolean(), workers: z.number().int() })),
  })
  .openapi("Health");
