import {
  type BatchChunkJob,
  decodeBlocks,
  decodeChunkOutput,
  decodeValues,
  encodeChunkOutput,
  encodeRowPointer,
  messageOf,
  readValuesRecord,
} from "@ferry/protocol";
import { Worker, type WorkerOptions } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { batchQueueNames, type Keys, predictionEpoch } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { readPackedRows } from "../shared/packed-rows.js";
import { retrying, transient } from "../shared/retrying.js";
import { StorageQuota } from "../shared/storage-quota.js";
import { type BatchStop, BatchStops } from "./batch-stops.js";
import { NOT_RUN, type PackedHandler, type PackedOutputs } from "./handlers.js";
import { RowBuffers } from "./row-buffers.js";

/**
 * Stores a chunk's answers once and counts its rows only the first time, so that a retried
 * chunk (after a worker died mid-chunk) counts nothing twice. Both keys carry the batch's tag.
 * KEYS: the chunk's output, the batch. ARGV: ttl, the packed output, rows ok, rows failed.
 */
export const STORE_CHUNK = `
if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'EX', ARGV[1]) then
  -- a batch whose record expired meanwhile is not made again, without its TTL
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('HINCRBY', KEYS[2], 'succeeded', ARGV[3])
    redis.call('HINCRBY', KEYS[2], 'failed', ARGV[4])
  end
  return tonumber(ARGV[3]) + tonumber(ARGV[4])
end
return 0
`;

/** How long a completed batch's rows are tried to be given back through failures, in ms. */
const RELEASE_FOR_MS = 10_000;
/** Decoded rows kept for the next chunks: a few chunks of 2,048 MNIST rows (6.4 MB each). */
const ROW_BUFFER_BYTES = 64 << 20;

/** The worker's side of offline batches: chunk jobs through the row handler, and the flow's control jobs. */
export class BatchJobConsumer {
  private readonly store: LuaCommand<number>;
  private readonly batchRows: StorageQuota;
  private readonly stops: BatchStops;
  private readonly rowBuffers = new RowBuffers(ROW_BUFFER_BYTES);

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {
    this.store = new LuaCommand(redis, "ferryStoreChunk", 2, STORE_CHUNK);
    this.batchRows = new StorageQuota(redis, keys, "batch-rows");
    this.stops = new BatchStops(redis, keys);
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
        const [[, owner] = []] =
          (await this.redis
            .multi()
            .hget(batch, "owner")
            .hset(batch, { status: "completed", finished_at: Date.now() })
            .expire(batch, this.ttlS)
            .exec()) ?? [];
        // its rows have run: its owner's budget of rows waiting (BATCH_ROWS_PER_KEY_BYTES) has
        // them back, tried again through a blip (a hold not let go keeps the key's budget
        // until its batch would have expired)
        if (typeof owner === "string")
          await retrying(
            () => this.batchRows.release(owner, job.data.batch),
            RELEASE_FOR_MS,
            transient,
          );
      },
      options,
    );
    return [gates, parents];
  }

  /**
   * A chunk of an offline batch: its rows, packed, through the version serving the queue as
   * whole batches (`packed`), and its answers stored as one packed value; each answered key's
   * latest prediction is a pointer into it.
   */
  async processChunk(data: BatchChunkJob, packed: PackedHandler | undefined, lastAttempt: boolean) {
    const held = await this.stops.hold(data.batch);
    try {
      const stop = held.stop();
      if (stop) return await this.notRun(data, stop);
      return await this.answerChunk(data, packed, held.stop);
    } catch (err) {
      // the input file its rows lie in was deleted before it ran: its lines fail as such, at
      // once (no attempt would find them)
      if (err instanceof FileRowsGone) {
        await this.failChunk(data, err.message, "NOT_FOUND");
        return { stored: 0 };
      }
      // its batch was cancelled (or forgotten) while it waited for a worker, its rows dropped:
      // not run, and not retried
      const stop = err instanceof RowsGone ? await this.stops.read(data.batch) : undefined;
      if (stop) return await this.notRun(data, stop);
      // its last attempt: the rows are answered as failed, not left out
      if (lastAttempt) await this.failChunk(data, messageOf(err)).catch(() => undefined);
      throw err;
    } finally {
      held.release();
    }
  }

  /**
   * A chunk its batch no longer wants: answered as not run when cancelled (its results and
   * counts name every key), nothing stored when the batch is gone (no one reads it); its rows
   * dropped either way.
   */
  private async notRun(data: BatchChunkJob, stop: BatchStop) {
    if (stop === "cancelled") await this.failChunk(data, NOT_RUN, "CANCELLED");
    if (data.packed) await this.redis.del(this.keys.batchChunkRows(data.batch, data.packed.chunk));
    return { stored: 0 };
  }

  private async answerChunk(
    data: BatchChunkJob,
    packed: PackedHandler | undefined,
    stop: () => BatchStop | undefined,
  ) {
    if (!packed) throw new Error(`model ${data.model} takes no offline batches`);
    const { chunk, input, keys, rows, decoded } = await this.rows(data);
    let out: PackedOutputs;
    try {
      out = await packed({ input, rows, count: keys.length, stopped: () => !!stop() });
    } finally {
      // the handler has read the rows (its batches copied them) whichever way it ended
      if (decoded) this.rowBuffers.give(decoded);
    }
    // gone while it ran (an upload refused midway): nothing of it is kept
    if (stop() === "gone") return this.notRun(data, "gone");
    const failed = Object.keys(out.errors).length;
    const value = encodeChunkOutput({
      width: out.width,
      values: out.values,
      keys,
      model_version: data.version,
      batch: data.batch,
      errors: out.errors,
    });
    const fresh = await this.store.run(
      this.redis,
      this.keys.batchChunkOut(data.batch, chunk),
      this.keys.batch(data.batch),
      this.ttlS,
      value,
      keys.length - failed,
      failed,
    );
    if (data.predictions !== false) {
      // the rows as stored: a retry's own errors may differ from the stored attempt's
      const stored =
        fresh > 0 ? out.errors : await this.storedErrors(data.batch, chunk, out.errors);
      await this.point(data, chunk, keys, out.width, stored);
    }
    // answered and kept: its rows are not needed again (a retry of a kept chunk stores nothing)
    if (data.packed) await this.redis.del(this.keys.batchChunkRows(data.batch, chunk));
    return { stored: fresh };
  }

  /**
   * A chunk that failed for good (its last attempt, or a worker that died holding it alone):
   * each of its rows stored as failed with `message`, so that its batch's counts add up and
   * its results name every key. An attempt that stored the chunk already wins.
   */
  async failChunk(data: BatchChunkJob, message: string, code = "MODEL_ERROR"): Promise<void> {
    const keys = data.packed?.keys ?? data.items?.map((i) => i.key) ?? [];
    if (keys.length === 0) return;
    const errors: PackedOutputs["errors"] = {};
    for (let row = 0; row < keys.length; row++) errors[row] = { code, message };
    const value = encodeChunkOutput({
      width: 0,
      values: new Float32Array(0),
      keys,
      model_version: data.version,
      batch: data.batch,
      errors,
    });
    await this.store.run(
      this.redis,
      this.keys.batchChunkOut(data.batch, data.packed?.chunk ?? 0),
      this.keys.batch(data.batch),
      this.ttlS,
      value,
      0,
      keys.length,
    );
  }

  /**
   * Each answered key's latest prediction, a pointer into its stored chunk: written after the
   * chunk is, so a pointer never names values that were not kept (a key's earlier answer
   * stays until then); a retried chunk writes the same pointers again. It lives apart from
   * the batch (another slot on a cluster).
   */
  private async point(
    data: BatchChunkJob,
    chunk: number,
    keys: readonly string[],
    width: number,
    errors: PackedOutputs["errors"],
  ): Promise<void> {
    const pointers: string[] = [];
    for (const [row, key] of keys.entries())
      if (!errors[row])
        pointers.push(
          key,
          encodeRowPointer({ batch: data.batch, chunk, row, width, model_version: data.version }),
        );
    if (pointers.length === 0) return;
    const epoch = predictionEpoch(Date.now(), this.ttlS);
    const predictions = this.keys.predictions(data.model, data.owner ?? "", epoch);
    await this.redis
      .multi()
      .hset(predictions, ...pointers)
      // a span's answers are kept until two spans after it opened: at least JOB_TTL_S each
      .expireat(predictions, (epoch + 2) * this.ttlS)
      .exec();
  }

  /** The failed rows of a chunk stored by an earlier attempt (`ours` if it is gone). */
  private async storedErrors(
    batch: string,
    chunk: number,
    ours: PackedOutputs["errors"],
  ): Promise<PackedOutputs["errors"]> {
    const bytes = await this.redis.getBuffer(this.keys.batchChunkOut(batch, chunk));
    return bytes ? decodeChunkOutput(bytes).errors : ours;
  }

  /** A chunk's rows, packed: as ingestion stored them, or a job's base64 items put together. */
  private async rows(data: BatchChunkJob) {
    if (!data.packed) {
      const items = data.items ?? [];
      const input = Object.keys(items[0]?.inputs ?? {})[0] ?? "";
      return {
        chunk: 0,
        input,
        keys: items.map((i) => i.key),
        rows: Buffer.concat(items.map((i) => Buffer.from(i.inputs[input] ?? "", "base64"))),
      };
    }
    const { chunk, input, keys, encoding, file } = data.packed;
    if (file) return { chunk, input, keys, ...(await this.fileRows(file, keys.length)) };
    const stored = await this.redis.getBuffer(this.keys.batchChunkRows(data.batch, chunk));
    if (!stored) throw new RowsGone(`the rows of chunk ${chunk} of batch ${data.batch} are gone`);
    let rows = stored;
    let decoded: Float32Array | undefined;
    if (encoding === "blocks") {
      const values = decodeBlocks(stored, (count) => {
        decoded = this.rowBuffers.take(count);
        return decoded;
      });
      rows = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
    }
    if (rows.length % keys.length !== 0) {
      if (decoded) this.rowBuffers.give(decoded);
      throw new Error(
        `chunk ${chunk} of batch ${data.batch} holds ${rows.length} bytes for ${keys.length} rows`,
      );
    }
    return { chunk, input, keys, rows, decoded };
  }

  /**
   * A chunk's rows read where a batch input file's upload packed them (one look for all its
   * chunks), decoded into one array handed from chunk to chunk, FP32 as the input takes them.
   */
  private async fileRows(file: { id: string; chunks: number[] }, rowCount: number) {
    const records = await readPackedRows(this.redis, this.keys, file.id, file.chunks);
    const blocks = records.map((record, k) => {
      if (!record)
        throw new FileRowsGone(
          `the batch's input file ${file.id} was deleted before this line ran (its rows in chunk ${file.chunks[k]} are gone)`,
        );
      return readValuesRecord(record);
    });
    let count = 0;
    for (const block of blocks) count += block.count;
    if (count % rowCount !== 0)
      throw new Error(`file ${file.id}'s chunks hold ${count} values for ${rowCount} rows`);
    const decoded = this.rowBuffers.take(count);
    let at = 0;
    for (const block of blocks) {
      decodeValues(block, decoded, at);
      at += block.count;
    }
    const rows = Buffer.from(decoded.buffer, decoded.byteOffset, count * 4);
    return { rows, decoded };
  }
}

/** A chunk's stored rows are gone: expired, or dropped when its batch was cancelled. */
class RowsGone extends Error {}

/** The batch input file a chunk's rows lie in is gone: deleted (or expired) before it ran. */
class FileRowsGone extends Error {}
