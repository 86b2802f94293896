import { z } from "zod";
import { rowInputsSchema, WIRE_VERSION } from "./wire.js";

/** Names of the queues that hold batch parents and their ingestion gates. */
export const BATCH_QUEUE = "batches";
export const BATCH_GATE_QUEUE = "batch-gates";

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

/** What a batch stores per key and `GET /v1/predictions/{model}/{key}` serves. */
export interface StoredPrediction {
  key: string;
  prediction: number;
  confidence: number;
  scores: number[];
  model_version: string;
  batch: string;
}

/** Softmax of logits: the argmax, its probability, and every class's probability. */
export function classify(logits: readonly number[]): {
  prediction: number;
  confidence: number;
  scores: number[];
} {
  let best = 0;
  for (let k = 1; k < logits.length; k++) if ((logits[k] ?? 0) > (logits[best] ?? 0)) best = k;
  const max = logits[best] ?? 0;
  const exp = logits.map((l) => Math.exp(l - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  const scores = exp.map((e) => e / sum);
  return { prediction: best, confidence: scores[best] ?? 0, scores };
}
