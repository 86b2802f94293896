import { FerryError, type InferRow, type OutputTensor, type RowResult } from "@ferry/protocol";
import type { SpanContext } from "@ferry/telemetry";
import { recordRowSpans } from "../tracing/row-spans.js";
import type { Batcher } from "./batcher.js";

/** What answering a sync-lane row through a dynamic batcher needs of its server. */
export interface RowServing<B> {
  readonly model: string;
  readonly version: string;
  readonly batcher: Batcher<B, Record<string, OutputTensor>>;
  /** Counts the row by outcome ("ok", or an error code in lower case). */
  count(outcome: string): void;
  /** The version's execution stats: the row's wait in the batcher. */
  waited(queueMs: number): void;
}

/**
 * A row's answer from its batch, with where its time went (`timing`) and its spans when
 * traced; every failure becomes a row error, never an exception. Shared by the classifier's
 * and the embedder's servers, which differ only in how a row becomes a batch item.
 */
export async function answerBatched<B extends { batch?: SpanContext }>(
  s: RowServing<B>,
  row: InferRow,
  item: B,
  signal: AbortSignal | undefined,
  times: { acceptedAt: number; pickedAt: number },
): Promise<RowResult> {
  try {
    const outcome = await s.batcher.submit(item, row.deadline, signal);
    s.count("ok");
    if (row.trace)
      recordRowSpans(
        row,
        s.model,
        s.version,
        { acceptedAt: times.acceptedAt, ...outcome },
        item.batch,
      );
    s.waited(outcome.queueMs);
    return {
      rid: row.rid,
      ok: true,
      outputs: outcome.output,
      timing: {
        queue_ms: outcome.queueMs,
        compute_ms: outcome.computeMs,
        batch_size: outcome.batchSize,
        wait_ms: Math.max(0, times.pickedAt - times.acceptedAt),
      },
    };
  } catch (err) {
    const error = err instanceof FerryError ? err : new FerryError("MODEL_ERROR", String(err));
    s.count(error.code.toLowerCase());
    return { rid: row.rid, ok: false, error: { code: error.code, message: error.message } };
  }
}
