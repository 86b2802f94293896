import { type ChunkOutput, FerryError } from "@ferry/protocol";
import type { BatchJobStore, PackedChunk } from "./batch-job-store.js";

/** One model version's batch in a run, and the index its next chunk takes. */
interface OpenBatch {
  id: Promise<string>;
  model: string;
  version: string;
  next: number;
}

/**
 * Packed chunks run for a caller that holds their rows (an OpenAI batch's predict lines): each
 * chunk queued on its model version's offline path and its answers awaited, all of a run's
 * chunks of one version in one batch of the store, created with the first and sealed when the
 * run closes. A batch per chunk cost each chunk its own flow (a parent and a gate job, their
 * completion, a replication wait): about as long as the worker took to run its rows.
 */
export class ChunkRun {
  private readonly batches = new Map<string, OpenBatch>();
  private closed = false;

  constructor(
    private readonly store: BatchJobStore,
    /** The tenant the batches belong to. */
    private readonly owner: string,
  ) {}

  /**
   * Queues `chunk` on `model` `version` and waits for its answers, in its rows' order;
   * undefined once `signal` aborts. `deadline` (epoch ms): past it, DEADLINE_EXCEEDED.
   */
  async run(
    model: string,
    version: string,
    chunk: Omit<PackedChunk, "index">,
    signal: AbortSignal,
    deadline = Number.POSITIVE_INFINITY,
  ): Promise<ChunkOutput | undefined> {
    if (this.closed) throw new FerryError("INTERNAL", "chunk run already closed");
    const key = `${model}\u0000${version}`;
    let batch = this.batches.get(key);
    if (!batch) {
      batch = { id: this.store.create(model, version, this.owner), model, version, next: 0 };
      this.batches.set(key, batch);
    }
    const index = batch.next++;
    const id = await batch.id.catch((err: unknown) => {
      // a batch that could not be created (Redis refused): the next chunk tries again
      if (this.batches.get(key) === batch) this.batches.delete(key);
      throw err;
    });
    await this.store.addChunk(id, model, version, this.owner, { ...chunk, index }, false);
    return this.store.chunkOutput(id, index, chunk.keys.length, signal, deadline);
  }

  /**
   * Ends the run: each batch sealed, so that its flow completes and expires; `discard` (the
   * run was stopped) removes instead what is still queued of it.
   */
  async close(discard: boolean): Promise<void> {
    this.closed = true;
    await Promise.all(
      [...this.batches.values()].map(async (batch) => {
        const id = await batch.id.catch(() => undefined);
        if (id === undefined) return;
        if (discard) await this.store.discard(id, batch.model, batch.version);
        else await this.store.seal(id, batch.model, batch.version);
      }),
    );
  }
}
