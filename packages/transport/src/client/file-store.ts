import { decodeChunkAnswers, FerryError } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { readPackedRows } from "../shared/packed-rows.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import { APPEND, BEGIN, DISCARD, FINISH, KEEP } from "./file-scripts.js";
import { type ListPage, OwnerIndex, sortTime } from "./owner-index.js";
import { type FileLink, type NewFile, pairs, parseFile, type StoredFile } from "./stored-file.js";

export type { FileLink, NewFile, StoredFile } from "./stored-file.js";

/**
 * Uploaded files and the files batches write (OpenAI's Files API), in Redis: a hash
 * describing each, its bytes in a list of chunks that each hold whole lines, and an index per
 * tenant. A file is written a chunk at a time and read a chunk at a time, so neither side
 * holds a whole file. Every key expires (`ttlS` from upload, longer while a batch reads it).
 */
export class FileStore {
  private readonly appendScript: LuaCommand<number>;
  private readonly keepScript: LuaCommand<number>;
  private readonly finishScript: LuaCommand<string[] | null>;
  private readonly discardScript: LuaCommand<string | null>;
  private readonly beginScript: LuaCommand<number>;
  private readonly index: OwnerIndex;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** How long a file is kept from its upload, in s. */
    readonly ttlS: number,
  ) {
    this.appendScript = new LuaCommand(redis, "ferryAppendFileChunkHeadRows", 4, APPEND);
    this.keepScript = new LuaCommand(redis, "ferryKeepFilePacked", 3, KEEP);
    this.finishScript = new LuaCommand(redis, "ferryFinishFileLinked", 4, FINISH);
    this.discardScript = new LuaCommand(redis, "ferryDiscardFilePacked", 4, DISCARD);
    this.beginScript = new LuaCommand(redis, "ferryBeginFilePacked", 4, BEGIN);
    this.index = new OwnerIndex(redis, (owner) => keys.files(owner));
  }

  /**
   * Starts a file (anything an earlier attempt left under its id is dropped). A `writer` fences
   * the file: from now on only appends, a finish and a discard that name it are taken, so a
   * writer that began it before (a batch runner that lost its lock, still running; an upload
   * whose retry took its key over) writes nothing more into it. A number is ordered (FileStore
   * takes the higher as the later, and one numbered lower cannot begin it again:
   * WriterFencedError): a runner's is its takeover count, an upload's its start time.
   */
  async begin(file: NewFile, writer = ""): Promise<void> {
    assertReady(this.redis);
    const now = Math.floor(Date.now() / 1000);
    const { id } = file;
    const fields: Record<string, string | number> = {
      ...file,
      bytes: 0,
      lines: 0,
      created_at: now,
      expires_at: now + this.ttlS,
      status: "uploading",
      urls: "[]",
      writer,
    };
    const began = await guarded(() =>
      this.beginScript.run(
        this.redis,
        this.keys.file(id),
        this.keys.fileChunks(id),
        this.keys.fileIds(id),
        this.keys.filePacked(id),
        this.ttlS,
        writer,
        ...Object.entries(fields).flat(),
      ),
    );
    if (began !== 1) throw rewritten(id);
  }

  /**
   * Appends a chunk of whole lines (`lines` of them not blank); `customIds`, when given, are
   * checked unique across the file. Returns the index in `customIds` of the first repeated one.
   * A `writer` other than the one that began the file last is refused (WriterFencedError).
   */
  async append(
    id: string,
    chunk: Uint8Array,
    lines: number,
    customIds: readonly string[] = [],
    writer = "",
    /** The chunk's lines packed (a batch input file's predict lines), kept beside it. */
    packed?: PackedLinesParts,
  ): Promise<number | undefined> {
    const ids = [
      this.keys.file(id),
      this.keys.fileChunks(id),
      this.keys.fileIds(id),
      this.keys.filePacked(id),
    ];
    const at = await guarded(() =>
      this.appendScript.run(
        this.redis,
        ...ids,
        this.ttlS,
        chunk.byteLength,
        lines,
        bufferOf(chunk),
        writer,
        packed ? bufferOf(packed.head) : "",
        packed ? bufferOf(packed.rows) : "",
        // as JSON: a lone surrogate (JSON allows "\ud800") would reach Redis as UTF-8's U+FFFD,
        // and two distinct ids as one
        ...customIds.map((c) => JSON.stringify(c)),
      ),
    );
    if (at === -2) throw new FerryError("NOT_FOUND", `File '${id}' is gone`);
    if (at === -3) throw rewritten(id);
    return at >= 0 ? at : undefined;
  }

  /**
   * A batch's file, begun by `writer`, made whole as a link to the batch's kept answers rather
   * than a copy of them: `bytes` and `lines` as its content reads them (`FileLink`). Refused
   * as `finish` is; the batch then keeps its answers as long as the file
   * (`OpenAiBatchStore.finish`'s `keepAnswers`).
   */
  finishLinked(
    id: string,
    owner: string,
    writer: string,
    link: FileLink,
    size: { bytes: number; lines: number },
  ): Promise<StoredFile> {
    const fields = [
      ...["bytes", size.bytes, "lines", size.lines, "linked_batch", link.batch],
      ...["linked_part", link.part, "linked_chunks", link.chunks, "linked_sibling", link.sibling],
    ];
    const expiresAtS = Math.floor(Date.now() / 1000) + this.ttlS;
    return this.whole(id, owner, "[]", writer, expiresAtS, "", fields);
  }

  /** The file is whole: it is listed, and readable by its owner. */
  finish(
    id: string,
    owner: string,
    urls: readonly string[],
    writer = "",
    expiresAtS = Math.floor(Date.now() / 1000) + this.ttlS,
    /** The keyed upload's fingerprint (`StoredFile.fingerprint`). */
    fingerprint = "",
  ): Promise<StoredFile> {
    return this.whole(id, owner, JSON.stringify(urls), writer, expiresAtS, fingerprint, []);
  }

  /** `finish` with the file's own fields besides (a linked file's). */
  private async whole(
    id: string,
    owner: string,
    urls: string,
    writer: string,
    expiresAtS: number,
    fingerprint: string,
    fields: Array<string | number>,
  ): Promise<StoredFile> {
    const raw = await guarded(() =>
      this.finishScript.run(
        this.redis,
        this.keys.file(id),
        this.keys.fileIds(id),
        this.keys.fileChunks(id),
        this.keys.filePacked(id),
        urls,
        writer,
        this.ttlS,
        expiresAtS,
        fingerprint,
        ...fields,
      ),
    );
    const file = raw ? parseFile(pairs(raw)) : undefined;
    if (!file) {
      const now = writer ? await this.get(id) : undefined;
      throw now ? rewritten(id) : new FerryError("NOT_FOUND", `File '${id}' is gone`);
    }
    // in ms, not created_at's whole seconds: files made within one second list newest first
    await this.index.add(owner, id, sortTime(file.created_at), this.ttlS);
    return file;
  }

  /**
   * A file whose upload or writing failed: nothing of it stays. With a `writer`, only while
   * that writer is the one that began it last (another's file is left alone).
   */
  async discard(id: string, writer = ""): Promise<void> {
    if (!writer) return this.delete(id).catch(() => undefined);
    const owner = await guarded(() =>
      this.discardScript.run(
        this.redis,
        this.keys.file(id),
        this.keys.fileChunks(id),
        this.keys.fileIds(id),
        this.keys.filePacked(id),
        writer,
      ),
    ).catch(() => null);
    if (owner !== null) await this.index.remove(owner, id).catch(() => undefined);
  }

  async get(id: string): Promise<StoredFile | undefined> {
    assertReady(this.redis);
    return parseFile(await guarded(() => this.redis.hgetall(this.keys.file(id))));
  }

  /** A page of `owner`'s whole files, newest first unless `order` is "asc". */
  list(owner: string, page: ListPage, purpose?: string) {
    assertReady(this.redis);
    return this.index.page(
      owner,
      page,
      (ids) => Promise.all(ids.map((id) => this.get(id))),
      (file) => file.status === "processed" && (purpose === undefined || file.purpose === purpose),
    );
  }

  async delete(id: string): Promise<void> {
    const file = await this.get(id);
    await guarded(() =>
      this.redis.del(
        this.keys.file(id),
        this.keys.fileChunks(id),
        this.keys.fileIds(id),
        this.keys.filePacked(id),
      ),
    );
    if (file) await this.index.remove(file.owner, id);
    // a linked file's lines are its batch's kept answers: they go with the last file of the
    // two that reads them (else they expire with the batch)
    const link = file?.linked;
    if (link && (link.sibling === "" || !(await this.get(link.sibling))))
      await guarded(() => this.redis.del(this.keys.openAiBatchLines(link.batch)));
  }

  /** Keeps a file at least `ttlS` more seconds (a batch reading it may run that long). */
  async keep(id: string, ttlS: number): Promise<void> {
    const expiresAt = Math.floor(Date.now() / 1000) + ttlS;
    const kept = await guarded(() =>
      this.keepScript.run(
        this.redis,
        this.keys.file(id),
        this.keys.fileChunks(id),
        this.keys.filePacked(id),
        ttlS,
        expiresAt,
      ),
    );
    const file = kept === 1 ? await this.get(id) : undefined;
    if (file) await this.index.keep(file.owner, id, ttlS);
  }

  /**
   * The file's bytes, a stored chunk (whole lines) at a time; a file linked to its batch's
   * kept answers (`finishLinked`), its block of each kept chunk in turn. `file`: its
   * description as the caller already read it (the content route, to check its owner), not
   * read again.
   */
  async *chunks(id: string, file?: StoredFile): AsyncGenerator<Buffer> {
    const link = (file ?? (await this.get(id)))?.linked;
    if (link) {
      yield* this.linkedChunks(link);
      return;
    }
    for (let k = 0; ; k++) {
      const chunk = await this.chunk(id, k);
      if (!chunk) return;
      yield chunk;
    }
  }

  /**
   * A linked file's bytes: its part of each of its batch's kept chunks, LINKED_PAGE chunks a
   * round trip (one after another, each had waited a round trip while the answer's socket
   * sat idle).
   */
  private async *linkedChunks(link: FileLink): AsyncGenerator<Buffer> {
    const key = this.keys.openAiBatchLines(link.batch);
    for (let from = 0; from < link.chunks; from += LINKED_PAGE) {
      const fields: string[] = [];
      for (let k = from; k < Math.min(link.chunks, from + LINKED_PAGE); k++) fields.push(`c${k}`);
      const values = await guarded(() => this.redis.hmgetBuffer(key, ...fields));
      for (const value of values) {
        // a chunk of no line (blank ones alone) may have kept nothing
        if (value === null) continue;
        const block = decodeChunkAnswers(value)[link.part];
        if (block.lines === 0) continue;
        yield block.bytes;
        yield NEWLINE;
      }
    }
  }

  /** The file's stored chunk `index` (whole lines); undefined past its last (a linked file's: none). */
  async chunk(id: string, index: number): Promise<Buffer | undefined> {
    const [chunk] = await guarded(() =>
      this.redis.lrangeBuffer(this.keys.fileChunks(id), index, index),
    );
    return chunk;
  }

  /** Whether any of the file's chunks was kept with its lines packed (`append`'s `packed`). */
  async anyPacked(id: string): Promise<boolean> {
    return (await guarded(() => this.redis.exists(this.keys.filePacked(id)))) === 1;
  }

  /** Chunk `index`'s packed lines' head, when the upload kept them so (`append`'s `packed`). */
  async packedHead(id: string, index: number): Promise<Buffer | undefined> {
    const head = await guarded(() => this.redis.hgetBuffer(this.keys.filePacked(id), `h${index}`));
    return head ?? undefined;
  }

  /** The packed rows of chunks `chunks` (`append`'s `packed`), each null where it is gone. */
  packedRows(id: string, chunks: readonly number[]): Promise<Array<Buffer | null>> {
    return readPackedRows(this.redis, this.keys, id, chunks);
  }

  /** The file's lines that are not blank, a stored chunk at a time. */
  async *lines(id: string): AsyncGenerator<string[]> {
    for await (const chunk of this.chunks(id)) yield linesOf(chunk);
  }
}

/** Kept chunks a linked file's content reads in one round trip. */
const LINKED_PAGE = 4;
const NEWLINE = Buffer.from("\n");

/** A chunk's lines packed, as two values: the head the API reads, the rows a worker reads. */
export interface PackedLinesParts {
  head: Uint8Array;
  rows: Uint8Array;
}

function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A stored chunk's lines that are not blank. */
export function linesOf(chunk: Buffer): string[] {
  return chunk
    .toString("utf8")
    .split("\n")
    .filter((line) => line.trim() !== "");
}

/**
 * A fenced writer's refusal: another writer began the file since (a batch runner that lost
 * its lock, still running, while the one that took over writes the batch's files again).
 */
export class WriterFencedError extends FerryError {
  constructor(id: string) {
    super("UNAVAILABLE", `File '${id}' is being written by another writer`);
    this.name = "WriterFencedError";
  }
}

function rewritten(id: string): WriterFencedError {
  return new WriterFencedError(id);
}
