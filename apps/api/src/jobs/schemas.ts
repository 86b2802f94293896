import { prioritySchema, timeoutMsSchema } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";

export const jobBodySchema = z
  .object({
    model: z.string(),
    version: z.string().optional(),
    input: z.record(z.string(), z.unknown()),
    priority: prioritySchema.optional(),
    timeout_ms: timeoutMsSchema.optional(),
  })
  .openapi("JobRequest");

export const jobRecordSchema = z
  .object({
    id: z.string(),
    model: z.string(),
    status: z.enum(["queued", "running", "succeeded", "failed", "cancelled", "expired"]),
    created_at: z.number().openapi({ description: "Unix time, seconds" }),
    started_at: z.number().nullable(),
    finished_at: z.number().nullable(),
    result: z.unknown().nullable(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    timings: z
      .object({
        queue_ms: z.number(),
        batch_ms: z.number(),
        infer_ms: z.number(),
        total_ms: z.number(),
      })
      .nullable()
      .openapi({
        description:
          "Where a finished job's time went, as a sync answer's Server-Timing says it: queue (to a worker's pick-up), batch (waiting to join a batch), infer, total (from its submission)",
      }),
  })
  .openapi("Job");

export const jobAcceptedSchema = z
  .object({
    id: z.string(),
    status: z.literal("queued"),
    urls: z.object({ self: z.string(), events: z.string() }),
  })
  .openapi("JobAccepted");
