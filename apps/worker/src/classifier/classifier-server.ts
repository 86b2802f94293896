import type { InferRow, ModelConfig, OutputTensor, RowResult } from "@ferry/protocol";
import {
  type BatchRunner,
  classifierMismatch,
  type ExecutionProvider,
  GraphMismatchError,
  loadBatchRunner,
} from "@ferry/runtime";
import type { ExecutionStats, PackedOutputs, PackedRows, RowContext } from "@ferry/transport";
import type { WorkerMetrics } from "../metrics.js";
import { answerBatched, type RowServing } from "./batched-row.js";
import type { Batcher } from "./batcher.js";
import { runPackedChunk } from "./packed-chunk.js";
import { recordedBatcher, type TracedRow } from "./recorded-batch.js";
import { type DecodedRow, decodeInputRow, packRows, splitRows } from "./tensor-packing.js";

/** A row in the batcher: its tensors, and its trace (to link from the batch's span). */
interface BatchedRow extends TracedRow {
  tensors: DecodedRow;
}

/**
 * Serves one classifier version: validates each row, batches rows dynamically and runs the
 * batches on `instance_count` ONNX Runtime sessions (threads), or inline on the event loop.
 */
export class ClassifierServer {
  private constructor(
    readonly config: ModelConfig,
    readonly version: string,
    private readonly runtime: BatchRunner,
    private readonly batcher: Batcher<BatchedRow, Record<string, OutputTensor>>,
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

  /** The hot path's counter, with its labels bound once. */
  private readonly rowsOk: { inc(): void };

  static async load(
    config: ModelConfig,
    version: string,
    onnxPath: string,
    executionProvider: ExecutionProvider,
    metrics: WorkerMetrics,
    stats: Pick<ExecutionStats, "row" | "execution">,
  ): Promise<ClassifierServer> {
    const runtime = await loadBatchRunner(onnxPath, {
      inline: config.inline,
      instances: config.instance_count,
      intraOpThreads: config.intra_op_threads,
      executionProvider,
    });
    const mismatch = classifierMismatch(
      config,
      runtime.graph,
      `${config.name}/${version}/model.onnx`,
    );
    if (mismatch) {
      await runtime.close();
      throw new GraphMismatchError(mismatch);
    }
    const labels = { model: config.name, version };
    const batcher = recordedBatcher<BatchedRow, Record<string, OutputTensor>>(
      labels,
      metrics,
      stats,
      async (rows) => {
        const tensors = rows.map((r) => r.tensors);
        return splitRows(await runtime.run(packRows(config.inputs, tensors)), rows.length);
      },
      {
        maxBatchSize: config.max_batch_size,
        preferredBatchSizes: config.dynamic_batching.preferred_batch_sizes,
        maxQueueDelayMs: config.dynamic_batching.max_queue_delay_ms,
        concurrency: config.instance_count,
      },
    );
    return new ClassifierServer(config, version, runtime, batcher, metrics, stats);
  }

  /**
   * Answers one row; every failure becomes a row error, never an exception. `acceptedAt`: when
   * the API accepted it (its job's), where its trace's `queue` span begins.
   */
  async handle(
    row: InferRow,
    ctx: Pick<RowContext, "signal">,
    acceptedAt = Date.now(),
  ): Promise<RowResult> {
    const pickedAt = Date.now();
    const decoded = decodeInputRow(this.config.inputs, row.inputs);
    if (typeof decoded === "string") {
      this.countRow("invalid");
      return { rid: row.rid, ok: false, error: { code: "INVALID_INPUT", message: decoded } };
    }
    return answerBatched(
      this.serving,
      row,
      row.trace ? { tensors: decoded, trace: row.trace } : { tensors: decoded },
      ctx.signal,
      { acceptedAt, pickedAt },
    );
  }

  /**
   * An offline chunk's packed rows through this version, max_batch_size at a time as whole
   * batches on instances live rows leave (`runPackedChunk`).
   */
  runPacked(rows: PackedRows): Promise<PackedOutputs> {
    return runPackedChunk(
      {
        config: this.config,
        version: this.version,
        runtime: this.runtime,
        runWhole: (work) => this.batcher.runWhole(work),
        metrics: this.metrics,
        stats: this.stats,
      },
      rows,
    );
  }

  /** This version as `answerBatched` sees it. */
  private readonly serving: RowServing<BatchedRow>;

  private countRow(outcome: string): void {
    this.metrics.rows.inc({ model: this.config.name, version: this.version, outcome });
  }

  /** Waits for queued rows to finish, then stops the sessions. */
  async close(): Promise<void> {
    await this.batcher.idle();
    await this.runtime.close();
  }
}
