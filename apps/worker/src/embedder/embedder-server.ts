import { join } from "node:path";
import { loadTokenizer, type Tokenizer, tokenizerConfigSchema } from "@ferry/model-repository";
import {
  EMBED_OUTPUT,
  type EmbeddingConfig,
  FerryError,
  type InferRow,
  type ModelConfig,
  type OutputTensor,
  type RowResult,
} from "@ferry/protocol";
import {
  type BatchRunner,
  type ExecutionProvider,
  embedderMismatch,
  GraphMismatchError,
  loadBatchRunner,
} from "@ferry/runtime";
import type { ExecutionStats, RowContext } from "@ferry/transport";
import { answerBatched, type RowServing } from "../classifier/batched-row.js";
import type { Batcher } from "../classifier/batcher.js";
import { recordedBatcher, type TracedRow } from "../classifier/recorded-batch.js";
import type { WorkerMetrics } from "../metrics.js";
import { padBatch, poolRows } from "./pooling.js";
import { rowTokens } from "./row-tokens.js";

/** A row in the batcher: its token ids, and its trace (to link from the batch's span). */
interface EmbedRow extends TracedRow {
  ids: number[];
}

/**
 * Serves one embedder version. Its rows come over the classifier's sync lane (one row per
 * input of a request, its text or token ids as the row's inputs): an embedding is a pure
 * function of its input answered at once, which is what the lane is for, so the transport
 * needed nothing new. Each row is tokenized here, batched by rows and by padded tokens (TEI's
 * max_batch_tokens), padded, run by ONNX Runtime on the version's instance threads, pooled
 * and normalized.
 */
export class EmbedderServer {
  private readonly rowsOk: { inc(): void };

  private constructor(
    readonly config: ModelConfig,
    readonly version: string,
    private readonly embedding: EmbeddingConfig,
    private readonly tokenizer: Tokenizer,
    private readonly runtime: BatchRunner,
    private readonly batcher: Batcher<EmbedRow, Record<string, OutputTensor>>,
    private readonly metrics: WorkerMetrics,
    private readonly stats: Pick<ExecutionStats, "row" | "execution">,
  ) {
    this.rowsOk = metrics.rows.labels({ model: config.name, version, outcome: "ok" });
    this.serving = {
      model: this.config.name,
      version: this.version,
      batcher: this.batcher,
      count: (outcome) => (outcome === "ok" ? this.rowsOk.inc() : this.countRow(outcome)),
      waited: (queueMs) => this.stats.row(this.config.name, this.version, queueMs),
    };
  }

  static async load(
    config: ModelConfig,
    version: string,
    dir: string,
    executionProvider: ExecutionProvider,
    metrics: WorkerMetrics,
    stats: Pick<ExecutionStats, "row" | "execution">,
  ): Promise<EmbedderServer> {
    // model.json's schema requires both for an embedder
    const embedding = config.embedding as EmbeddingConfig;
    const tokenizer = await loadTokenizer(dir, tokenizerConfigSchema.parse(config.tokenizer));
    const runtime = await loadBatchRunner(join(dir, version, "model.onnx"), {
      inline: config.inline,
      instances: config.instance_count,
      intraOpThreads: config.intra_op_threads,
      executionProvider,
    });
    const mismatch = embedderMismatch(
      config,
      runtime.graph,
      `${config.name}/${version}/model.onnx`,
    );
    if (mismatch) {
      await runtime.close();
      throw new GraphMismatchError(mismatch);
    }
    const typeIds = runtime.graph.inputs.some((t) => t.name === "token_type_ids");
    const output = config.outputs[0]?.name ?? "";
    const labels = { model: config.name, version };
    const batcher = recordedBatcher<EmbedRow, Record<string, OutputTensor>>(
      labels,
      metrics,
      stats,
      async (rows) => {
        const ids = rows.map((r) => r.ids);
        const outputs = await runtime.run(padBatch(ids, typeIds));
        const hidden = outputs[output];
        if (!hidden) throw new FerryError("MODEL_ERROR", `the model gave no output '${output}'`);
        const lengths = ids.map((r) => r.length);
        const vectors = poolRows(hidden, lengths, embedding.pooling, embedding.normalize);
        return vectors.map((vector, r) => ({
          [EMBED_OUTPUT.embedding]: { dims: [vector.length], data: Array.from(vector) },
          [EMBED_OUTPUT.tokens]: { dims: [1], data: [lengths[r] as number] },
        }));
      },
      {
        maxBatchSize: config.max_batch_size,
        preferredBatchSizes: config.dynamic_batching.preferred_batch_sizes,
        maxQueueDelayMs: config.dynamic_batching.max_queue_delay_ms,
        concurrency: config.instance_count,
        tokenBudget: {
          maxBatchTokens: embedding.max_batch_tokens,
          tokensOf: (row) => row.ids.length,
        },
      },
    );
    return new EmbedderServer(
      config,
      version,
      embedding,
      tokenizer,
      runtime,
      batcher,
      metrics,
      stats,
    );
  }

  /** Answers one row; every failure becomes a row error, never an exception. */
  async handle(
    row: InferRow,
    ctx: Pick<RowContext, "signal">,
    acceptedAt = Date.now(),
  ): Promise<RowResult> {
    const pickedAt = Date.now();
    const ids = rowTokens(row.inputs, this.tokenizer, this.embedding.max_tokens);
    if (typeof ids === "string") {
      this.countRow("invalid");
      return { rid: row.rid, ok: false, error: { code: "INVALID_INPUT", message: ids } };
    }
    return answerBatched(
      this.serving,
      row,
      row.trace ? { ids, trace: row.trace } : { ids },
      ctx.signal,
      { acceptedAt, pickedAt },
    );
  }

  /** This version as `answerBatched` sees it. */
  private readonly serving: RowServing<EmbedRow>;

  private countRow(outcome: string): void {
    this.metrics.rows.inc({ model: this.config.name, version: this.version, outcome });
  }

  /** Waits for queued rows to finish, then stops the sessions. */
  async close(): Promise<void> {
    await this.batcher.idle();
    await this.runtime.close();
  }
}
