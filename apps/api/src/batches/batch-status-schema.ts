import { z } from "@hono/zod-openapi";

/** A batch of Ferry's own shape, as `GET /v1/batches/{id}` and its cancel answer it. */
export const batchStatusSchema = z
  .object({
    id: z.string(),
    model: z.string(),
    version: z.string(),
    status: z.enum(["ingesting", "running", "completed", "cancelled"]),
    total: z.number(),
    succeeded: z.number(),
    failed: z.number(),
    created_at: z.number(),
    finished_at: z.number().nullable(),
    cancelled_at: z
      .number()
      .nullable()
      .openapi({ description: "When `POST /v1/batches/{id}/cancel` cancelled it" }),
    owner: z.string().openapi({ description: "Tenant id of the key that created it" }),
  })
  .openapi("Batch");
