import { z } from "zod";
import { rowInputsSchema, WIRE_VERSION } from "./wire.js";

/** Items one chunk job carries; the unit of progress and of retry. */
export const BATCH_CHUNK_SIZE = 1_000;

export const batchItemSchema = z.object({ key: z.string().min(1), inputs: rowInputsSchema });
export type BatchItem = z.infer<typeof batchItemSchema>;

/** One chunk of an offline batch, a child of the batch's parent job, on the model's queue. */
export const batchChunkJobSchema = z.object({
  v: z.literal(WIRE_VERSION),
  kind: z.literal("batch"),
  batch: z.string(),
  model: z.string(),
  version: z.string(),
  /** The tenant whose batch this is: its predictions are stored where only it reads them. */
  owner: z.string().default(""),
  items: z.array(batchItemSchema).min(1),
});
export type BatchChunkJob = z.input<typeof batchChunkJobSchema>;

/**
 * What a batch job stores per key: the model's first output as it came (the API turns it into
 * a prediction when it is read, as it does for live requests), or the row's error.
 */
export type StoredBatchRow =
  | { key: string; logits: number[]; model_version: string; batch: string }
  | { key: string; error: { code: string; message: string } };
