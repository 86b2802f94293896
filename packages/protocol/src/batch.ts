import { z } from "zod";
import { rowInputsSchema, WIRE_VERSION } from "./wire.js";

/** Items one chunk job carries at most; the unit of progress and of retry. */
export const BATCH_CHUNK_SIZE = 2_048;
/** Bytes of one chunk's rows at most (a chunk of wide rows holds fewer). */
export const BATCH_CHUNK_BYTES = 2 * 1024 * 1024;

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
  /**
   * false: the answers are the caller's alone (an OpenAI batch's predict lines), not each
   * key's latest prediction. @defaultValue true
   */
  predictions: z.boolean().optional(),
  /** The items, each row's tensors base64 (the form before packed chunks). */
  items: z.array(batchItemSchema).min(1).optional(),
  /**
   * The items as one binary tensor kept in Redis beside the batch (`Keys.batchChunkRows`): the
   * rows' bytes back to back, row major, for the model's one input; the job names them.
   */
  packed: z
    .object({
      chunk: z.number().int().nonnegative(),
      input: z.string(),
      keys: z.array(z.string()).min(1),
      /**
       * "blocks": the rows are FP32 values packed as blocks (packed-values.ts: an OpenAI
       * batch's predict lines as their upload packed them, sent so by an API before `file`),
       * decoded by the worker.
       */
      encoding: z.literal("blocks").optional(),
      /**
       * The rows are not beside the batch but where a batch input file's upload packed them:
       * these chunks' rows (`Keys.filePacked`, each a values record), in order, which the
       * worker reads and decodes. The API never holds them on the way.
       */
      file: z
        .object({ id: z.string().min(1), chunks: z.array(z.number().int().nonnegative()).min(1) })
        .optional(),
    })
    .optional(),
});
export type BatchChunkJob = z.input<typeof batchChunkJobSchema>;

/**
 * What a batch job stores per key: the model's first output as it came (the API turns it into
 * a prediction when it is read, as it does for live requests), or the row's error.
 */
export type StoredBatchRow =
  | { key: string; logits: number[]; model_version: string; batch: string }
  | { key: string; error: { code: string; message: string } };
