import type { InferenceClient, OpenAiBatchState } from "@ferry/transport";
import { decodeChunkAnswers } from "./chunk-answers.js";
import { batchOutputFile, type OutputFile } from "./output-file.js";

/**
 * Answers a run holds for chunks kept ahead of the one the files wait for; past it, the files
 * are left to the finalizer (a chunk stuck behind many finished ones would hold them all).
 */
const MAX_WAITING_BYTES = 32 * 1024 * 1024;

/**
 * A first run's output and error files written as its chunks' answers are kept, in the input
 * file's order, rather than copied from the kept answers once every line has run: the copy
 * read back every answer the run had just written (~25 MB for 100,000 predict lines) and
 * wrote it again, after the last line, while nothing else ran. The answers are still kept
 * first, so that a runner that takes the batch over (this one died, or lost its lock) finds
 * them: it begins both files afresh under a later writer (FileStore fences this one out), and
 * so does the finalizer wherever this run did not write every line (a chunk answered a line at
 * a time, or kept by another runner; a cancel; a window that ran out).
 */
export class StreamedOutput {
  /** The chunk the files take next, and the lines written so far. */
  private next = 0;
  private lines = 0;
  private readonly waiting = new Map<number, Buffer>();
  private waitingBytes = 0;
  private writing: Promise<void> = Promise.resolve();
  private given = false;
  private readonly begun = new Set<OutputFile>();

  private constructor(
    /** The run's writer on both files (`OpenAiBatchStore.finalizer`). */
    readonly writer: string,
    readonly output: OutputFile,
    readonly errors: OutputFile,
  ) {}

  /**
   * The files of a run that has kept no answer yet, under a writer of its own; each begun
   * with its first line (a file begun and left without one would lose its key's TTL's worth
   * of time before it is closed, and with it the key).
   */
  static async begin(client: InferenceClient, batch: OpenAiBatchState): Promise<StreamedOutput> {
    const writer = await client.openAiBatches.finalizer(batch.id);
    return new StreamedOutput(
      writer,
      batchOutputFile(client.files, batch, "output", writer),
      batchOutputFile(client.files, batch, "error", writer),
    );
  }

  /** Chunk `chunk`'s answers as this run kept them (`ChunkAnswers`' value). */
  kept(chunk: number, value: Buffer): void {
    if (this.given) return;
    this.waiting.set(chunk, value);
    this.waitingBytes += value.byteLength;
    if (this.waitingBytes > MAX_WAITING_BYTES) {
      this.giveUp();
      return;
    }
    this.writing = this.writing.then(
      () => this.writeReady(),
      () => undefined,
    );
    this.writing.catch(() => this.giveUp());
  }

  /** A chunk this run did not keep whole: the finalizer writes the files from what is kept. */
  giveUp(): void {
    this.given = true;
    this.waiting.clear();
    this.waitingBytes = 0;
  }

  /**
   * Both files, every line written, once the batch's `total` lines are in them; undefined
   * where this run gave up on them (the finalizer writes them then).
   */
  async whole(total: number): Promise<{ output: OutputFile; errors: OutputFile } | undefined> {
    await this.writing.catch(() => undefined);
    if (this.given || this.lines !== total) return undefined;
    return { output: this.output, errors: this.errors };
  }

  private async beginFile(file: OutputFile): Promise<void> {
    await file.begin();
    this.begun.add(file);
  }

  /** Writes every chunk waiting whose turn it is. */
  private async writeReady(): Promise<void> {
    for (;;) {
      const value = this.given ? undefined : this.waiting.get(this.next);
      if (value === undefined) return;
      this.waiting.delete(this.next);
      this.waitingBytes -= value.byteLength;
      const { ok, failed } = decodeChunkAnswers(value);
      if (ok.lines > 0 && !this.begun.has(this.output)) await this.beginFile(this.output);
      await this.output.addBlock(ok);
      if (failed.lines > 0 && !this.begun.has(this.errors)) await this.beginFile(this.errors);
      await this.errors.addBlock(failed);
      this.lines += ok.lines + failed.lines;
      this.next++;
    }
  }
}
