import type { LineBlock } from "@ferry/protocol";
import type { FileStore, NewFile, StoredFile } from "@ferry/transport";
import { fileIdFor } from "./batch-lines.js";

/** Bytes of lines gathered before they are stored as one chunk. */
const CHUNK_BYTES = 256 * 1024;
const NEWLINE = Buffer.from("\n");

/**
 * A file a batch writes (its output, its errors), a chunk of lines at a time: whatever its
 * size, only one chunk is held. Nothing is kept of a file that got no line. It writes as its
 * run's writer: once a later run begins the same file (a runner that took the batch over),
 * this one's appends, finish and begin are refused (WriterFencedError), so two never
 * interleave, and the later run writes both files whole.
 */
export class OutputFile {
  /** Lines and blocks of lines not stored yet, each without its last newline. */
  private pending: Array<string | Buffer> = [];
  private pendingBytes = 0;
  private pendingLines = 0;
  private lines = 0;

  constructor(
    private readonly store: Pick<FileStore, "begin" | "append" | "finish" | "discard">,
    private readonly file: NewFile,
    /** This run's writer number (OpenAiBatchStore.finalizer): a later run's is higher. */
    private readonly writer: string,
  ) {}

  /** Starts it afresh (a batch whose finalizing was cut off writes it again, whole). */
  begin(): Promise<void> {
    return this.store.begin(this.file, this.writer);
  }

  async add(line: string): Promise<void> {
    this.pending.push(line);
    this.pendingBytes += line.length;
    this.pendingLines++;
    this.lines++;
    if (this.pendingBytes >= CHUNK_BYTES) await this.flush();
  }

  /** Whole lines at once (no newline after the last), as `add` adds each. */
  async addBlock(block: LineBlock): Promise<void> {
    if (block.lines === 0) return;
    this.pending.push(block.bytes);
    this.pendingBytes += block.bytes.byteLength;
    this.pendingLines += block.lines;
    this.lines += block.lines;
    if (this.pendingBytes >= CHUNK_BYTES) await this.flush();
  }

  /** The file once whole, or undefined when it got no line (and is gone). */
  async close(): Promise<StoredFile | undefined> {
    await this.flush();
    if (this.lines === 0) {
      await this.discard();
      return undefined;
    }
    return this.store.finish(this.file.id, this.file.owner, [], this.writer);
  }

  /** Nothing of it stays, unless another writer began it since (its file is left alone). */
  discard(): Promise<void> {
    return this.store.discard(this.file.id, this.writer);
  }

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const parts: Buffer[] = [];
    for (const part of this.pending)
      parts.push(typeof part === "string" ? Buffer.from(part) : part, NEWLINE);
    const chunk = Buffer.concat(parts);
    const count = this.pendingLines;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingLines = 0;
    await this.store.append(this.file.id, chunk, count, [], this.writer);
  }
}

/** A batch's output or error file, under the id every run and the finalizer write it to. */
export function batchOutputFile(
  store: Pick<FileStore, "begin" | "append" | "finish" | "discard">,
  batch: { id: string; owner: string },
  kind: "output" | "error",
  writer: string,
): OutputFile {
  return new OutputFile(store, outputFileOf(batch, kind), writer);
}

/** A batch's output or error file as it is described, whoever writes it and however. */
export function outputFileOf(
  batch: { id: string; owner: string },
  kind: "output" | "error",
): NewFile {
  return {
    id: fileIdFor(batch.id, kind),
    owner: batch.owner,
    filename: `${batch.id}_${kind}.jsonl`,
    purpose: "batch_output",
  };
}
