import { randomUUID } from "node:crypto";
import {
  type BatchChunkJob,
  bullPriority,
  type ChunkOutput,
  decodeChunkOutput,
  FerryError,
  pause,
  queueName,
  WIRE_VERSION,
} from "@ferry/protocol";
import { FlowProducer, Job, Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { type AcceptReplicas, ensureReplicated } from "../shared/durable-accept.js";
import { batchQueueNames, bullQueueName, type Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { CHUNK_PRIORITY, ChunkTurns } from "./chunk-turns.js";

/** The longest wait between looks for a chunk's answers, in ms. */
const CHUNK_POLL_MS = 50;

/** How often a chunk awaited looks at its job's state, in ms. */
const JOB_LOOK_MS = 2_000;

/** One chunk of a batch's items: their keys, and their rows back to back in binary. */
export interface PackedChunk {
  /** Its place in the batch (0, 1, ...): names its rows in Redis. */
  index: number;
  /** The model's input the rows are for. */
  input: string;
  keys: string[];
  /** The rows, unless `file` says where they lie. */
  rows?: Buffer;
  /** "blocks": `rows` are packed FP32 blocks (`encodeBlocks`), not the input's bytes. */
  encoding?: "blocks";
  /** The rows are these chunks' packed rows of a batch input file (`readPackedRows`). */
  file?: { id: string; chunks: number[] };
}

export interface BatchJobStatus {
  id: string;
  model: string;
  version: string;
  status: "ingesting" | "running" | "completed" | "cancelled";
  total: number;
  succeeded: number;
  failed: number;
  created_at: number;
  finished_at: number | null;
  /** When it was cancelled (its rows answered by then, or while it stopped, are kept). */
  cancelled_at: number | null;
  /** The tenant that created the batch ("" when the API is open). */
  owner: string;
}

/**
 * Marks a running batch cancelled, once: "cancelling" when its chunks are to be removed (this
 * call cancelled it, or one before did and it has not finished: a cancel cut short by a
 * failure is taken up again), "cancelled" when it has finished since, else its status (a
 * batch still being ingested or already completed is left as it is). KEYS: the batch. ARGV:
 * now (epoch ms).
 */
const CANCEL = `
if redis.call('HEXISTS', KEYS[1], 'cancelled_at') == 1 then
  if redis.call('HEXISTS', KEYS[1], 'finished_at') == 1 then return 'cancelled' end
  return 'cancelling'
end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' then return status or '' end
redis.call('HSET', KEYS[1], 'cancelled_at', ARGV[1])
return 'cancelling'
`;

/**
 * Offline batch prediction as a BullMQ flow: a parent job per batch, whose children are the
 * chunks (on the model's queue, at the lowest priority so live traffic goes first) and one
 * gate. The gate keeps the parent from completing while chunks are still being added; when
 * ingestion ends it is promoted, and once every child is done the parent completes the batch.
 * Parent and gate live in control queues of the model version (batchQueueNames), so that a
 * flow stays within one cluster slot.
 */
export class BatchJobStore {
  private readonly flows: FlowProducer;
  private readonly gates = new Map<string, Queue>();
  private readonly turns: ChunkTurns;
  private readonly cancelScript: LuaCommand<string>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: (name: string) => Queue,
    private readonly ttlS: number,
    /** Replicas a sealed batch must have reached (WAIT), and how long that may take. */
    private readonly accept: AcceptReplicas,
  ) {
    this.flows = new FlowProducer({ connection: redis, prefix: keys.prefix });
    this.turns = new ChunkTurns(redis, keys, ttlS);
    this.cancelScript = new LuaCommand(redis, "ferryCancelBatch", 1, CANCEL);
    this.flows.on("error", () => {});
  }

  async create(
    model: string,
    version: string,
    owner: string,
    id: string = randomUUID(),
  ): Promise<string> {
    const control = batchQueueNames(queueName(model, version));
    await this.redis
      .multi()
      .hset(this.keys.batch(id), {
        model,
        version,
        owner,
        status: "ingesting",
        total: 0,
        succeeded: 0,
        failed: 0,
        created_at: Date.now(),
      })
      .expire(this.keys.batch(id), this.ttlS)
      .exec();
    await this.flows.add({
      name: "batch",
      queueName: control.parents,
      data: { batch: id },
      opts: { jobId: id, removeOnComplete: { age: this.ttlS }, removeOnFail: { age: this.ttlS } },
      children: [
        {
          name: "gate",
          queueName: control.gates,
          data: { batch: id },
          // its answer is kept in the parent's record; the gate itself has no reader
          opts: {
            jobId: `gate-${id}`,
            // ingestion promotes it when the last chunk is queued; one whose ingestion never
            // ended (its API died) opens when its batch expires, and the flow's keys go
            delay: this.ttlS * 1_000,
            removeOnComplete: true,
            removeOnFail: true,
          },
        },
      ],
    });
    return id;
  }

  /**
   * Queues one chunk as a child of the batch: its rows, packed, as one binary value beside the
   * batch (no JSON or base64 on the way), and a job that names them.
   */
  async addChunk(
    id: string,
    model: string,
    version: string,
    owner: string,
    chunk: PackedChunk,
    /** false: the answers are not kept as each key's latest prediction. */
    predictions = true,
  ): Promise<string> {
    const data: BatchChunkJob = {
      v: WIRE_VERSION,
      kind: "batch",
      batch: id,
      model,
      version,
      owner,
      packed: {
        chunk: chunk.index,
        input: chunk.input,
        keys: chunk.keys,
        ...(chunk.encoding ? { encoding: chunk.encoding } : {}),
        ...(chunk.file ? { file: chunk.file } : {}),
      },
      ...(predictions ? {} : { predictions: false }),
    };
    const queue = queueName(model, version);
    // the rows first: a job never names rows that are not there (rows a file keeps are there)
    if (chunk.rows)
      await this.redis.set(this.keys.batchChunkRows(id, chunk.index), chunk.rows, "EX", this.ttlS);
    // a key's chunk takes the turn after its last one still waiting: every key's first
    // waiting chunk runs before anyone's second, so a batch of ten rows is not queued behind
    // all of another key's (it waited 18.7 s behind one key's four of 50,000 rows), nor
    // behind its many small ones; with one tenant (API_KEYS unset) a chunk's turn is its
    // place in its batch, every batch's first before anyone's second
    const jobId = `${id}-c${chunk.index}`;
    const priority =
      owner === ""
        ? bullPriority(CHUNK_PRIORITY, chunk.index)
        : await this.turns.priority(queue, owner, jobId);
    const job = await this.queue(queue).add("batch", data, {
      jobId,
      parent: { id, queue: `${this.keys.prefix}:${batchQueueNames(queue).parents}` },
      priority,
      removeOnComplete: true,
      removeOnFail: { age: this.ttlS },
      // A chunk that fails for good still lets the batch finish; its items count as failed.
      failParentOnFailure: false,
      ignoreDependencyOnFailure: true,
      attempts: 3,
    });
    await this.redis
      .multi()
      .hincrby(this.keys.batch(id), "total", chunk.keys.length)
      .hincrby(this.keys.batch(id), "chunks", 1)
      // a record that expired meanwhile (an open batch past JOB_TTL_S) is not left without one
      .expire(this.keys.batch(id), this.ttlS, "NX")
      .exec();
    return job.id ?? "";
  }

  /** How long a batch and what it holds are kept, in s (a batch never sealed lives as long). */
  get keptForS(): number {
    return this.ttlS;
  }

  /** Removes a chunk's job nobody waits for any more, unless a worker holds it already. */
  async removeChunk(model: string, version: string, job: string): Promise<void> {
    await this.queue(queueName(model, version))
      .remove(job)
      .catch(() => undefined);
  }

  /**
   * Forgets a discarded batch's record: its id then names nothing (a retry of its request with
   * the same Idempotency-Key makes it afresh rather than finding it).
   */
  async forget(id: string): Promise<void> {
    await this.redis.del(this.keys.batch(id));
  }

  /** Deletes the stored rows of a batch's chunks (one slot: the batch's tag). */
  private async dropRows(id: string, handedOut?: number): Promise<void> {
    const chunks = handedOut ?? Number((await this.redis.hget(this.keys.batch(id), "chunks")) ?? 0);
    for (let from = 0; from < chunks; from += 1_000) {
      const rows: string[] = [];
      for (let k = from; k < Math.min(chunks, from + 1_000); k++)
        rows.push(this.keys.batchChunkRows(id, k));
      await this.redis.del(...rows);
    }
  }

  /**
   * Ingestion is over: the gate opens, and the batch completes when its chunks have.
   * `fingerprint`: the keyed upload's (its Idempotency-Key's), kept for a takeover to compare.
   */
  async seal(id: string, model: string, version: string, fingerprint?: string): Promise<void> {
    await this.redis.hset(
      this.keys.batch(id),
      "status",
      "running",
      ...(fingerprint === undefined ? [] : ["fingerprint", fingerprint]),
    );
    const gates = batchQueueNames(queueName(model, version)).gates;
    const gate = await Job.fromId(this.gateQueue(gates), `gate-${id}`);
    await gate?.promote();
    await this.replicated(id, queueName(model, version));
  }

  /** An accepted batch survives a failover: its state on its shard, its flow on its queue's. */
  private async replicated(id: string, queue: string): Promise<void> {
    const written = [this.keys.batch(id), `${this.keys.prefix}:${bullQueueName(queue)}:meta`];
    await ensureReplicated(this.redis, written, this.accept, `batch ${id}`, `/v1/batches/${id}`);
  }

  /**
   * Removes a batch nobody waits for any more, its chunks but those a worker holds already,
   * and their rows (BullMQ removes the jobs, not the rows stored beside them). `chunks`: the
   * chunk indices its writer handed out (a chunk whose rows were stored but whose add failed
   * is not in the batch's count); the batch's count when not given.
   */
  async discard(id: string, model: string, version: string, chunks?: number): Promise<boolean> {
    const parents = this.gateQueue(batchQueueNames(queueName(model, version)).parents);
    const removed = await parents.remove(id, { removeChildren: true }).catch(() => 0);
    const whole = removed === 1;
    if (!whole) {
      // a chunk a worker holds locks the flow (BullMQ removes none of it): its queued chunks
      // go, and the batch is sealed, so that it completes once the held ones end
      const parent = await Job.fromId(parents, id).catch(() => undefined);
      await parent?.removeUnprocessedChildren().catch(() => undefined);
      await this.seal(id, model, version).catch(() => undefined);
    }
    // once no queued job names them
    await this.dropRows(id, chunks).catch(() => undefined);
    return whole;
  }

  /**
   * Cancels a running batch: its chunks still queued go, with their rows; a chunk a worker
   * holds stops before its next batch of rows (`BatchStops`: those not run are answered as
   * such), and the batch reads as cancelled from now, with the rows answered so far in its
   * results. Returns the status
   * that kept a batch from being cancelled (still ingesting, completed), "cancelled" (by this
   * call or one before), or undefined for no such batch.
   */
  async cancel(id: string): Promise<BatchJobStatus["status"] | undefined> {
    const key = this.keys.batch(id);
    const [model, version] = await this.redis.hmget(key, "model", "version");
    if (!model || version === null || version === undefined) return undefined;
    const found = await this.cancelScript.run(this.redis, key, Date.now());
    if (found !== "cancelling") return (found || undefined) as BatchJobStatus["status"] | undefined;
    // no parent is left to complete it (no chunk was held): it ends now, kept as a completed one is
    if (await this.discard(id, model, version))
      await this.redis.multi().hset(key, "finished_at", Date.now()).expire(key, this.ttlS).exec();
    return "cancelled";
  }

  /**
   * Waits for one chunk's answers, in its rows' order; undefined once `signal` aborts.
   * `deadline` (epoch ms): past it, DEADLINE_EXCEEDED. `job`: the chunk's job (`addChunk`),
   * looked at now and then, so that one BullMQ failed with no answers stored (past its stall
   * limit) is not waited for until the deadline while its batch is still open.
   */
  async chunkOutput(
    id: string,
    index: number,
    rows: number,
    signal: AbortSignal,
    deadline: number,
    job?: { model: string; version: string; id: string },
  ): Promise<ChunkOutput | undefined> {
    const out = this.keys.batchChunkOut(id, index);
    let lookAt = Date.now() + JOB_LOOK_MS;
    for (let wait = 5; !signal.aborted; wait = Math.min(wait * 2, CHUNK_POLL_MS)) {
      if (Date.now() >= deadline)
        throw new FerryError("DEADLINE_EXCEEDED", `chunk of ${rows} rows not answered in time`);
      let gone = (await this.redis.hget(this.keys.batch(id), "status")) === "completed";
      if (job && !gone && Date.now() >= lookAt) {
        lookAt = Date.now() + JOB_LOOK_MS;
        const state = await this.queue(queueName(job.model, job.version)).getJobState(job.id);
        // a completed chunk's job is removed ("unknown") once its answers are stored
        gone = state === "failed" || state === "unknown";
      }
      // read after the look: a chunk stored is there before its job or batch completes
      const bytes = await this.redis.getBuffer(out);
      if (bytes) return decodeChunkOutput(bytes);
      // a chunk that failed for good completes its batch, or fails its job, with no answers
      if (gone) throw new FerryError("MODEL_ERROR", `chunk of ${rows} rows failed on the model`);
      await pause(wait, signal);
    }
    return undefined;
  }

  /** The fingerprint of the keyed upload that made batch `id` (`seal`), if it had one. */
  async fingerprint(id: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.batch(id), "fingerprint")) ?? undefined;
  }

  async status(id: string): Promise<BatchJobStatus | undefined> {
    const raw = await this.redis.hgetall(this.keys.batch(id));
    if (!raw.model) return undefined;
    return {
      id,
      model: raw.model,
      version: raw.version ?? "",
      // a cancelled batch's parent may still complete it (the chunks a worker held, ended)
      status: raw.cancelled_at
        ? "cancelled"
        : ((raw.status as BatchJobStatus["status"]) ?? "running"),
      total: Number(raw.total ?? 0),
      succeeded: Number(raw.succeeded ?? 0),
      failed: Number(raw.failed ?? 0),
      created_at: Number(raw.created_at ?? 0),
      finished_at: raw.finished_at ? Number(raw.finished_at) : null,
      cancelled_at: raw.cancelled_at ? Number(raw.cancelled_at) : null,
      owner: raw.owner ?? "",
    };
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.gates.values()].map((q) => q.close()));
    await this.flows.close();
  }

  /** A model version's gate queue (a BullMQ name already: batchQueueNames'). */
  private gateQueue(name: string): Queue {
    let queue = this.gates.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.redis, prefix: this.keys.prefix });
      queue.on("error", () => {});
      this.gates.set(name, queue);
    }
    return queue;
  }
}
