import { type ChunkOutput, FerryError } from "@ferry/protocol";
import type { BatchJobStore, PackedChunk } from "./batch-job-store.js";

/** The longest a run's batch takes chunks before a new one takes over, in ms. */
const MAX_BATCH_AGE_MS = 10 * 60_000;

/** One of a run's batches: its model version, the index its next chunk takes, its age. */
interface OpenBatch {
  id: Promise<string>;
  model: string;
  version: string;
  next: number;
  startedAt: number;
  /** Chunks on their way into it: it is sealed only once none is, or one could land after. */
  adding: number;
  /** A newer batch takes the version's chunks now. */
  retired: boolean;
  sealed: Promise<void> | undefined;
}

/**
 * Packed chunks run for a caller that holds their rows (an OpenAI batch's predict lines): each
 * chunk queued on its model version's offline path and its answers awaited, a run's chunks of
 * one version in one batch of the store, created with the first and sealed when the run
 * closes (or when it has taken chunks for half the time the store keeps a batch, ten minutes
 * at most: an open batch's gate opens by itself once that time is up, and the batch
 * completes under the chunks still coming). A batch per chunk cost each chunk its own flow (a
 * parent and a gate job, their completion, a replication wait): about as long as the worker
 * took to run its rows.
 */
export class ChunkRun {
  /** The batch taking each model version's chunks now. */
  private readonly open = new Map<string, OpenBatch>();
  /** Every batch of the run, the open ones and those sealed before it ended. */
  private readonly all: OpenBatch[] = [];
  private closed = false;

  constructor(
    private readonly store: BatchJobStore,
    /** The tenant the batches belong to. */
    private readonly owner: string,
  ) {}

  /**
   * Queues `chunk` on `model` `version` and waits for its answers, in its rows' order;
   * undefined once `signal` aborts. `deadline` (epoch ms): past it, DEADLINE_EXCEEDED, and
   * the chunk's job goes unless a worker holds it already.
   */
  async run(
    model: string,
    version: string,
    chunk: Omit<PackedChunk, "index">,
    signal: AbortSignal,
    deadline = Number.POSITIVE_INFINITY,
  ): Promise<ChunkOutput | undefined> {
    if (this.closed) throw new FerryError("INTERNAL", "chunk run already closed");
    const batch = this.batchFor(model, version);
    const index = batch.next++;
    batch.adding++;
    let id: string;
    let job: string;
    try {
      id = await batch.id.catch((err: unknown) => {
        // a batch that could not be created (Redis refused): the next chunk tries again
        const key = `${model}\u0000${version}`;
        if (this.open.get(key) === batch) this.open.delete(key);
        throw err;
      });
      job = await this.store.addChunk(id, model, version, this.owner, { ...chunk, index }, false);
    } finally {
      batch.adding--;
      this.sealIfRetired(batch);
    }
    const rows = chunk.keys.length;
    try {
      return await this.store.chunkOutput(id, index, rows, signal, deadline, {
        model,
        version,
        id: job,
      });
    } catch (err) {
      if (err instanceof FerryError && err.code === "DEADLINE_EXCEEDED")
        await this.store.removeChunk(model, version, job);
      throw err;
    }
  }

  /**
   * Ends the run: each batch sealed, so that its flow completes and expires; `discard` (the
   * run was stopped) removes instead what is still queued of each.
   */
  async close(discard: boolean): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.all.map(async (batch) => {
        const id = await batch.id.catch(() => undefined);
        if (id === undefined) return;
        if (discard) await this.store.discard(id, batch.model, batch.version, batch.next);
        else await (batch.sealed ?? this.seal(batch, id));
      }),
    );
  }

  /** The version's open batch, a new one in place of one past its age (sealed meanwhile). */
  private batchFor(model: string, version: string): OpenBatch {
    const key = `${model}\u0000${version}`;
    const current = this.open.get(key);
    const maxAge = Math.min(MAX_BATCH_AGE_MS, (this.store.keptForS * 1000) / 2);
    if (current && Date.now() - current.startedAt < maxAge) return current;
    if (current) {
      current.retired = true;
      this.sealIfRetired(current);
    }
    const batch: OpenBatch = {
      id: this.store.create(model, version, this.owner),
      model,
      version,
      next: 0,
      startedAt: Date.now(),
      adding: 0,
      retired: false,
      sealed: undefined,
    };
    this.open.set(key, batch);
    this.all.push(batch);
    return batch;
  }

  /** Seals a batch a newer one took over from, once no chunk is on its way into it. */
  private sealIfRetired(batch: OpenBatch): void {
    if (!batch.retired || batch.adding > 0 || batch.sealed) return;
    batch.sealed = batch.id.then(
      (id) => this.seal(batch, id),
      () => undefined,
    );
  }

  /** Seals a batch; one that could not be sealed opens by itself when the store's time is up. */
  private seal(batch: OpenBatch, id: string): Promise<void> {
    return this.store.seal(id, batch.model, batch.version).catch(() => undefined);
  }
}
