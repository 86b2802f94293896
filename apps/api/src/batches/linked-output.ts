import { decodeChunkAnswers } from "@ferry/protocol";
import type { FileLink, InferenceClient, OpenAiBatchState, StoredFile } from "@ferry/transport";
import { outputFileOf } from "./output-file.js";

/** What one of a batch's two files holds. */
interface Part {
  lines: number;
  bytes: number;
}

/**
 * A first run's output and error files as links to the answers it keeps (`FileStore`'s
 * `finishLinked`), rather than copies of them: every chunk it kept whole and fresh is read
 * where it is kept (`FileStore.chunks`), its output block for the output file and its error
 * block for the error file, in the input's order. A copy wrote every answer a second time
 * from the API's loop, ~40 MB for 100,000 predict lines, as much again as keeping them. The
 * run only counts what each file will hold; wherever it did not keep every line so (a chunk
 * answered a line at a time, or kept by another runner; a cancel; a window that ran out; a
 * runner taking the batch over), the finalizer writes both files from the kept answers
 * instead, as copies.
 */
export class LinkedOutput {
  private readonly chunks = new Set<number>();
  private readonly ok: Part = { lines: 0, bytes: 0 };
  private readonly failed: Part = { lines: 0, bytes: 0 };
  private given = false;

  private constructor(
    /** The run's writer on both files (`OpenAiBatchStore.finalizer`). */
    readonly writer: string,
  ) {}

  /** The files of a run that has kept no answer yet, under a writer of its own. */
  static async begin(client: InferenceClient, batch: OpenAiBatchState): Promise<LinkedOutput> {
    return new LinkedOutput(await client.openAiBatches.finalizer(batch.id));
  }

  /** Chunk `chunk`'s answers as this run kept them (`ChunkAnswers`' value), fresh. */
  kept(chunk: number, value: Buffer): void {
    if (this.given) return;
    if (this.chunks.has(chunk)) {
      this.giveUp();
      return;
    }
    this.chunks.add(chunk);
    const { ok, failed } = decodeChunkAnswers(value);
    for (const [part, block] of [
      [this.ok, ok],
      [this.failed, failed],
    ] as const) {
      part.lines += block.lines;
      // a block's lines, then the newline after its last
      if (block.lines > 0) part.bytes += block.bytes.byteLength + 1;
    }
  }

  /** A chunk this run did not keep whole: the finalizer writes the files from what is kept. */
  giveUp(): void {
    this.given = true;
  }

  /**
   * Both files linked to the kept answers, once the batch's `total` lines are in chunks 0 to
   * the last this run kept; false where this run gave up on them (the finalizer copies them
   * then). A file that would get no line is not made.
   */
  async link(
    client: InferenceClient,
    batch: { id: string; owner: string },
    total: number,
  ): Promise<{ output?: StoredFile; errors?: StoredFile } | false> {
    const chunks = this.chunks.size;
    if (this.given || this.ok.lines + this.failed.lines !== total) return false;
    for (let k = 0; k < chunks; k++) if (!this.chunks.has(k)) return false;
    const output = outputFileOf(batch, "output");
    const errors = outputFileOf(batch, "error");
    const made: { output?: StoredFile; errors?: StoredFile } = {};
    for (const [which, file, part, name, sibling] of [
      ["output", output, this.ok, "ok", this.failed.lines > 0 ? errors.id : ""],
      ["errors", errors, this.failed, "failed", this.ok.lines > 0 ? output.id : ""],
    ] as const) {
      if (part.lines === 0) continue;
      await client.files.begin(file, this.writer);
      const link: FileLink = { batch: batch.id, part: name, chunks, sibling };
      made[which] = await client.files.finishLinked(file.id, file.owner, this.writer, link, part);
    }
    return made;
  }
}
