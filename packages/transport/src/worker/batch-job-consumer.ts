import {
  type BatchChunkJob,
  type BatchItem,
  type InferJob,
  type RowResult,
  type StoredBatchRow,
  WIRE_VERSION,
} from "@ferry/protocol";
import { Worker, type WorkerOptions } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { batchQueueNames, type Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import type { RowContext, RowHandler } from "./handlers.js";

/**
 * Stores a chunk's result lines and counts an item only the first time its line is written,
 * so that a retried chunk (after a worker died mid-chunk) counts nothing twice. Both keys
 * carry the batch's tag. KEYS: results, batch. ARGV: ttl, then (key, line, ok) triples.
 */
const STORE_BATCH = `
local fresh = 0
for i = 2, #ARGV, 3 do
  local key, line, ok = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HSET', KEYS[1], key, line) == 1 then
    fresh = fresh + 1
    redis.call('HINCRBY', KEYS[2], ok == '1' and 'succeeded' or 'failed', 1)
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return fresh
`;

/** Batch rows handed to the batcher at once. */
const BATCH_SLICE = 64;

/** How long a batch row may take, in ms: batches have no caller waiting on a deadline. */
const BATCH_ROW_DEADLINE_MS = 600_000;

/** The worker's side of offline batches: chunk jobs through the row handler, and the flow's control jobs. */
export class BatchJobConsumer {
  private readonly store: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {
    this.store = new LuaCommand(redis, "ferryStoreBatch", 2, STORE_BATCH);
  }

  /**
   * Workers for a model version's control queues: a gate only needs to complete, and a
   * parent, which BullMQ runs once all its chunks are done, marks its batch complete.
   */
  controlWorkers(queue: string, options: WorkerOptions): Worker[] {
    const names = batchQueueNames(queue);
    const gates = new Worker(names.gates, async () => "open", options);
    const parents = new Worker<{ batch: string }>(
      names.parents,
      async (job) => {
        // kept JOB_TTL_S from its end (for a batch whose ingestion never ended, expired by
        // now, this writes a status with no model, which reads as unknown and expires too)
        const batch = this.keys.batch(job.data.batch);
        await this.redis
          .multi()
          .hset(batch, { status: "completed", finished_at: Date.now() })
          .expire(batch, this.ttlS)
          .exec();
      },
      options,
    );
    return [gates, parents];
  }

  /** A chunk of an offline batch: every item through the row handler, answers stored by key. */
  async processChunk(
    data: BatchChunkJob,
    jobId: string,
    handler: RowHandler,
  ): Promise<{ stored: number }> {
    const deadline = Date.now() + BATCH_ROW_DEADLINE_MS;
    const ctx: RowContext = { jobId, signal: new AbortController().signal };
    const infer: InferJob = {
      v: WIRE_VERSION,
      kind: "infer",
      model: data.model,
      version: data.version,
      rows: [],
      accepted_at: Date.now(),
    };
    const items = await this.items(data);
    // Slices, not the whole chunk at once, so that live rows reaching the same batcher
    // meanwhile are not stuck behind a thousand batch rows.
    const results: RowResult[] = [];
    for (let at = 0; at < items.length; at += BATCH_SLICE) {
      const slice = items.slice(at, at + BATCH_SLICE);
      results.push(
        ...(await Promise.all(
          slice.map((item) =>
            handler({ rid: item.key, inputs: item.inputs, deadline }, infer, ctx),
          ),
        )),
      );
    }
    const args: string[] = [];
    const predictions: string[] = [];
    for (const [k, result] of results.entries()) {
      const key = items[k]?.key ?? "";
      if (result.ok) {
        const logits = Object.values(result.outputs)[0]?.data ?? [];
        const stored: StoredBatchRow = {
          key,
          logits,
          model_version: data.version,
          batch: data.batch,
        };
        const line = JSON.stringify(stored);
        args.push(key, line, "1");
        predictions.push(key, line);
      } else {
        const failed: StoredBatchRow = { key, error: result.error };
        args.push(key, JSON.stringify(failed), "0");
      }
    }
    // the model's latest prediction per key lives apart from the batch (in another slot on a
    // cluster): written first, so that a counted item is always readable by key; a retried
    // chunk writes the same lines again
    if (predictions.length > 0)
      await this.redis
        .multi()
        .hset(this.keys.predictions(data.model, data.owner ?? ""), ...predictions)
        // a model's stored answers are kept JOB_TTL_S from the last batch that wrote one
        .expire(this.keys.predictions(data.model, data.owner ?? ""), this.ttlS)
        .exec();
    const fresh = await this.store.run(
      this.redis,
      this.keys.batchResults(data.batch),
      this.keys.batch(data.batch),
      this.ttlS,
      ...args,
    );
    // answered and kept: its rows are not needed again (a retry of a kept chunk stores nothing)
    if (data.packed) await this.redis.del(this.keys.batchChunkRows(data.batch, data.packed.chunk));
    return { stored: fresh };
  }

  /** A chunk's items: as the job carries them, or its packed rows split back into rows. */
  private async items(data: BatchChunkJob): Promise<BatchItem[]> {
    if (!data.packed) return data.items ?? [];
    const { chunk, input, keys } = data.packed;
    const rows = await this.redis.getBuffer(this.keys.batchChunkRows(data.batch, chunk));
    if (!rows) throw new Error(`the rows of chunk ${chunk} of batch ${data.batch} are gone`);
    const width = rows.length / keys.length;
    if (!Number.isInteger(width))
      throw new Error(
        `chunk ${chunk} of batch ${data.batch} holds ${rows.length} bytes for ${keys.length} rows`,
      );
    return keys.map((key, r) => ({
      key,
      inputs: { [input]: rows.toString("base64", r * width, (r + 1) * width) },
    }));
  }
}
