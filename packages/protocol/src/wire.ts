import { z } from "zod";
import { errorCodes } from "./errors.js";

/** Bumped when a message that crosses Redis changes shape; readers reject other versions. */
export const WIRE_VERSION = 1;

/**
 * One caller's input: tensor name -> that row's values (batch axis excluded), row-major,
 * encoded by `encodeTensor` in the datatype model.json gives the input.
 */
export const rowInputsSchema = z.record(z.string(), z.string());
export type RowInputs = z.infer<typeof rowInputsSchema>;

/**
 * W3C trace context (traceparent, tracestate) of the request that queued some work, so that
 * the worker's spans join its trace; absent when tracing is off.
 */
export const traceCarrierSchema = z.object({
  traceparent: z.string().max(128),
  tracestate: z.string().max(512).optional(),
});
export type TraceCarrierWire = z.infer<typeof traceCarrierSchema>;

export const inferRowSchema = z.object({
  /** Row id, unique per request; the caller matches its answer by it. */
  rid: z.string(),
  inputs: rowInputsSchema,
  /** Epoch ms after which the row must not be computed. */
  deadline: z.number(),
  /** The caller's X-Request-Id, carried so a worker's logs can name the request. */
  request_id: z.string().optional(),
  trace: traceCarrierSchema.optional(),
});
export type InferRow = z.infer<typeof inferRowSchema>;

/**
 * Job data for a classifier queue. The API may coalesce rows of several requests for one
 * model version into one group (one sync-lane entry), so that the Redis work is paid once
 * per group; an async job is one such message as one BullMQ job.
 */
export const inferJobSchema = z.object({
  v: z.literal(WIRE_VERSION),
  kind: z.literal("infer"),
  model: z.string(),
  version: z.string(),
  rows: z.array(inferRowSchema).min(1),
  /** Pub/sub channel of the API process waiting for these rows; absent for async jobs. */
  reply_to: z.string().optional(),
  /** Epoch ms when the API accepted the first row. */
  accepted_at: z.number(),
  /** Opaque to workers: what the API needs to render an async job's result later. */
  meta: z.record(z.string(), z.unknown()).optional(),
});
export type InferJob = z.infer<typeof inferJobSchema>;

export const wireErrorSchema = z.object({ code: z.enum(errorCodes), message: z.string() });
export type WireError = z.infer<typeof wireErrorSchema>;

/** Where the time of one row went, so the API can report it without scraping workers. */
export const rowTimingSchema = z.object({
  /** In the worker's dynamic batcher, waiting for a batch and a free instance. */
  queue_ms: z.number(),
  compute_ms: z.number(),
  batch_size: z.number().int(),
  /**
   * From the API's accept to this worker's pick-up (Redis and the transport), by the two
   * processes' clocks; absent from older workers.
   */
  wait_ms: z.number().optional(),
});
export type RowTiming = z.infer<typeof rowTimingSchema>;

export const outputTensorSchema = z.object({
  dims: z.array(z.number().int()),
  data: z.array(z.number()),
});
export type OutputTensor = z.infer<typeof outputTensorSchema>;

export const rowResultSchema = z.discriminatedUnion("ok", [
  z.object({
    rid: z.string(),
    ok: z.literal(true),
    outputs: z.record(z.string(), outputTensorSchema),
    timing: rowTimingSchema,
  }),
  z.object({ rid: z.string(), ok: z.literal(false), error: wireErrorSchema }),
]);
export type RowResult = z.infer<typeof rowResultSchema>;

/** What a worker publishes to a job's `reply_to` channel, and stores as the job's return value. */
export const inferReplySchema = z.object({
  v: z.literal(WIRE_VERSION),
  job: z.string(),
  model: z.string(),
  version: z.string(),
  worker: z.string(),
  results: z.array(rowResultSchema),
});
export type InferReply = z.infer<typeof inferReplySchema>;
