import type { OpenAiBatchState } from "@ferry/transport";
import { z } from "@hono/zod-openapi";
import { metadataSchema, unsupported } from "../http/schemas.js";

/** `POST /v1/batches` in OpenAI's shape (told from Ferry's by its `input_file_id`). */
export const openAiBatchRequestSchema = z
  .object({
    input_file_id: z.string().min(1),
    endpoint: z.string().openapi({
      description:
        "/v1/chat/completions, /v1/completions, /v1/responses, or Ferry's predict: /v1/models/{name}/predict for one model, /v1/models/{model}/predict for the model each line's url names",
    }),
    completion_window: z
      .string()
      .openapi({ description: 'The deadline, "24h" as OpenAI has it (any "<n>s|m|h" up to 168h)' }),
    metadata: metadataSchema.nullish(),
    output_expires_after: unsupported("output_expires_after"),
  })
  // unknown fields refused, as OpenAI refuses them: a keyed create is fingerprinted on the
  // loop, and 255 KB of `{}` in a field of no use had cost ~20 ms of it a request (attack)
  .strict()
  .openapi("OpenAiBatchRequest");
export type OpenAiBatchRequest = z.infer<typeof openAiBatchRequestSchema>;

const moment = z.number().nullable();
export const openAiBatchSchema = z
  .object({
    id: z.string(),
    object: z.literal("batch"),
    endpoint: z.string(),
    errors: z.unknown(),
    input_file_id: z.string(),
    completion_window: z.string(),
    status: z.enum([
      "validating",
      "failed",
      "in_progress",
      "finalizing",
      "completed",
      "expired",
      "cancelling",
      "cancelled",
    ]),
    output_file_id: z.string().nullable(),
    error_file_id: z.string().nullable(),
    created_at: z.number(),
    in_progress_at: moment,
    expires_at: z.number(),
    finalizing_at: moment,
    completed_at: moment,
    failed_at: moment,
    expired_at: moment,
    cancelling_at: moment,
    cancelled_at: moment,
    request_counts: z.object({ total: z.number(), completed: z.number(), failed: z.number() }),
    metadata: z.record(z.string(), z.string()).nullable(),
  })
  .openapi("OpenAiBatch");

/** A batch as OpenAI's Batch API shows it. */
export function batchObject(state: OpenAiBatchState): z.infer<typeof openAiBatchSchema> {
  return {
    id: state.id,
    object: "batch",
    endpoint: state.endpoint,
    errors: state.errors ?? null,
    input_file_id: state.input_file_id,
    completion_window: state.completion_window,
    status: state.status,
    output_file_id: state.output_file_id ?? null,
    error_file_id: state.error_file_id ?? null,
    created_at: state.created_at,
    in_progress_at: state.in_progress_at ?? null,
    expires_at: state.expires_at,
    finalizing_at: state.finalizing_at ?? null,
    completed_at: state.completed_at ?? null,
    failed_at: state.failed_at ?? null,
    expired_at: state.expired_at ?? null,
    cancelling_at: state.cancelling_at ?? null,
    cancelled_at: state.cancelled_at ?? null,
    request_counts: { total: state.total, completed: state.completed, failed: state.failed },
    metadata: state.metadata,
  };
}
