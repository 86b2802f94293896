import {
  type ChunkOutput,
  chunkRowOffset,
  decodeChunkOutput,
  decodeRowPointer,
  rowValues,
  type StoredBatchRow,
} from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import { type Keys, predictionEpoch } from "../shared/keys.js";

/** Result lines asked of Redis at a time (HSCAN's COUNT). */
const RESULTS_PAGE = 5_000;

/**
 * The read side of offline batches: a batch's answers in its items' order, and each key's
 * latest stored prediction, as the workers kept them (BatchJobStore writes the batches).
 */
export class BatchResults {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** How long answers are kept, in s (JOB_TTL_S): it names the predictions' spans. */
    private readonly ttlS: number,
  ) {}

  /**
   * The batch's answers in its items' order, a chunk at a time, so that no reader holds them
   * all; the next chunk is asked for while the caller handles this one. A chunk that failed
   * for good has no answers.
   */
  async *results(id: string): AsyncGenerator<StoredBatchRow[]> {
    const packed = await this.chunkOutputs(id);
    if (!packed) {
      yield* this.storedByKey(id);
      return;
    }
    for await (const bytes of packed) yield rowsOf(decodeChunkOutput(bytes));
  }

  /**
   * The batch's chunks of answers as the workers stored them (`encodeChunkOutput`'s bytes), in
   * its items' order, the next asked for while the caller handles one; undefined for a batch
   * stored a line per key (read those with `results`). A chunk that failed for good is skipped.
   */
  async chunkOutputs(id: string): Promise<AsyncGenerator<Buffer> | undefined> {
    const chunks = Number((await this.redis.hget(this.keys.batch(id), "chunks")) ?? 0);
    if (chunks === 0) return undefined;
    return this.readChunks(id, chunks);
  }

  private async *readChunks(id: string, chunks: number): AsyncGenerator<Buffer> {
    const read = (chunk: number) => {
      const asked = this.redis.getBuffer(this.keys.batchChunkOut(id, chunk));
      // a reader that stops early leaves the chunk it prefetched unread
      asked.catch(() => undefined);
      return asked;
    };
    let next = read(0);
    for (let chunk = 0; chunk < chunks; chunk++) {
      const bytes = await next;
      if (chunk + 1 < chunks) next = read(chunk + 1);
      if (bytes) yield bytes;
    }
  }

  /** A batch stored a line per key, as batches were before packed answers: in hash order. */
  private async *storedByKey(id: string): AsyncGenerator<StoredBatchRow[]> {
    const key = this.keys.batchResults(id);
    let cursor = "0";
    do {
      const [next, flat] = await this.redis.hscan(key, cursor, "COUNT", RESULTS_PAGE);
      cursor = next;
      const rows: StoredBatchRow[] = [];
      for (let k = 1; k < flat.length; k += 2)
        rows.push(JSON.parse(flat[k] ?? "") as StoredBatchRow);
      if (rows.length > 0) yield rows;
    } while (cursor !== "0");
  }

  /** The latest batch answer for `key`: a pointer to its row, then the row's values. */
  async prediction(model: string, key: string, owner: string): Promise<StoredBatchRow | undefined> {
    // this span's hash, then the one before (a key written in both: this span's is the later)
    const epoch = predictionEpoch(Date.now(), this.ttlS);
    const raw =
      (await this.redis.hget(this.keys.predictions(model, owner, epoch), key)) ??
      (await this.redis.hget(this.keys.predictions(model, owner, epoch - 1), key)) ??
      // the one hash of a Ferry before spans, until it expires
      (await this.redis.hget(this.keys.legacyPredictions(model, owner), key));
    if (raw === null) return undefined;
    if (raw.startsWith("{")) return JSON.parse(raw) as StoredBatchRow;
    const at = decodeRowPointer(raw);
    if (!at) return undefined;
    const offset = chunkRowOffset(at.width, at.row);
    const bytes = await this.redis.getrangeBuffer(
      this.keys.batchChunkOut(at.batch, at.chunk),
      offset,
      offset + at.width * 4 - 1,
    );
    // its chunk has expired (kept JOB_TTL_S from its batch)
    if (bytes.length < at.width * 4) return undefined;
    return { key, logits: rowValues(bytes), model_version: at.model_version, batch: at.batch };
  }
}

/** A chunk's answers as rows: each key's values, or its error. */
function rowsOf(out: ChunkOutput): StoredBatchRow[] {
  const { width, values } = out;
  return out.keys.map((key, r) => {
    const error = out.errors[r];
    if (error) return { key, error };
    const logits = new Array<number>(width);
    for (let k = 0; k < width; k++) logits[k] = values[r * width + k] ?? 0;
    return { key, logits, model_version: out.model_version, batch: out.batch };
  });
}
