import { decodeChunkAnswers, FerryError } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { readPackedRows } from "../shared/packed-rows.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import { type ListPage, OwnerIndex, sortTime } from "./owner-index.js";

/** A file as the Files API keeps it. */
export interface StoredFile {
  id: string;
  /** The tenant that uploaded it (or whose batch wrote it). */
  owner: string;
  filename: string;
  purpose: string;
  bytes: number;
  /** Its lines that are not blank. */
  lines: number;
  /** Unix seconds. */
  created_at: number;
  /** Unix seconds: when its keys expire. */
  expires_at: number;
  status: "uploading" | "processed";
  /** The distinct urls a batch input file's lines name. */
  urls: string[];
  /** Its keyed upload's fingerprint, for a retry that takes the key over to compare. */
  fingerprint?: string;
  /** A batch's output or error file whose lines are its kept answers (`finishLinked`). */
  linked?: FileLink;
}

/**
 * Where a batch's output or error file's lines are, when they are not copied into it: the
 * batch's kept answers (`Keys.openAiBatchLines`), chunk by chunk, each its `part`'s block.
 */
export interface FileLink {
  batch: string;
  part: "ok" | "failed";
  /** Chunks of kept answers, fields c0 .. c<chunks - 1>. */
  chunks: number;
  /** The batch's other file linked to the same answers ("" for none). */
  sibling: string;
}

/** A new file's description; the rest is counted as its chunks are appended. */
export type NewFile = Pick<StoredFile, "id" | "owner" | "filename" | "purpose">;

/**
 * Appends one chunk of whole lines, unless one of its lines' custom_ids was seen before in
 * this file: then nothing is appended, and the index of the first repeated id is returned
 * (-1: appended; -2: the file is gone, discarded or expired meanwhile; -3: another writer
 * began it again since). KEYS: file, chunks, ids, packed. ARGV: ttl, bytes, lines, chunk,
 * writer ("" for a file with one writer), the chunk's lines packed: their head ("" for none)
 * and their rows, custom_id...
 */
const APPEND = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'writer') ~= ARGV[5] then return -3 end
for i = 8, #ARGV do
  if redis.call('SADD', KEYS[3], ARGV[i]) == 0 then return i - 8 end
end
local chunks = redis.call('RPUSH', KEYS[2], ARGV[4])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[4], 'h' .. (chunks - 1), ARGV[6], 'r' .. (chunks - 1), ARGV[7])
end
redis.call('HINCRBY', KEYS[1], 'bytes', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'lines', ARGV[3])
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[1]) end
return -1
`;

/**
 * Marks a file whole, unless it is gone meanwhile (nothing is then written: a key without
 * its TTL would be left) or another writer began it again; it is kept the TTL from now (a
 * batch's output file is begun when its run starts, hours before it may be whole). KEYS:
 * file, ids, chunks, packed. ARGV: urls (JSON), writer ("" for any), ttl, expires_at, the
 * upload's fingerprint ("" for none), then field/value pairs (a linked file's). Returns the
 * file's fields.
 */
const FINISH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'writer') ~= ARGV[2] then return false end
redis.call('HSET', KEYS[1], 'status', 'processed', 'urls', ARGV[1], 'expires_at', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'fingerprint', ARGV[5]) end
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('DEL', KEYS[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[4], ARGV[3])
return redis.call('HGETALL', KEYS[1])
`;

/**
 * Starts a file afresh unless a writer numbered higher than `writer` began it (a runner that
 * took the batch over began it after this one). KEYS: file, chunks, ids, packed. ARGV: ttl,
 * writer, then field/value pairs. Returns 1 when it began the file.
 */
const BEGIN = `
local current = tonumber(redis.call('HGET', KEYS[1], 'writer') or '')
local writer = tonumber(ARGV[2])
if current and writer and current > writer then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
`;

/**
 * Deletes a file only while `writer` is the one that began it last. KEYS: file, chunks, ids,
 * packed. ARGV: writer. Returns the file's owner when it was deleted.
 */
const DISCARD = `
if redis.call('HGET', KEYS[1], 'writer') ~= ARGV[1] then return false end
local owner = redis.call('HGET', KEYS[1], 'owner')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return owner
`;

/**
 * Lets a file live at least `ttl` seconds from now (a batch that reads it may run that long).
 * KEYS: file, chunks, packed. ARGV: ttl, expires_at.
 */
const KEEP = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], 'expires_at', ARGV[2])
end
return 1
`;

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
   * kept answers (`finishLinked`), its block of each kept chunk in turn.
   */
  async *chunks(id: string): AsyncGenerator<Buffer> {
    const link = (await this.get(id))?.linked;
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

/** HGETALL's flat reply as a record. */
function pairs(flat: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let k = 0; k + 1 < flat.length; k += 2) record[flat[k] ?? ""] = flat[k + 1] ?? "";
  return record;
}

function parseFile(raw: Record<string, string>): StoredFile | undefined {
  if (!raw.id) return undefined;
  return {
    id: raw.id,
    owner: raw.owner ?? "",
    filename: raw.filename ?? "",
    purpose: raw.purpose ?? "",
    bytes: Number(raw.bytes ?? 0),
    lines: Number(raw.lines ?? 0),
    created_at: Number(raw.created_at ?? 0),
    expires_at: Number(raw.expires_at ?? 0),
    status: raw.status === "processed" ? "processed" : "uploading",
    urls: JSON.parse(raw.urls ?? "[]") as string[],
    ...(raw.fingerprint ? { fingerprint: raw.fingerprint } : {}),
    ...(raw.linked_batch
      ? {
          linked: {
            batch: raw.linked_batch,
            part: raw.linked_part === "failed" ? ("failed" as const) : ("ok" as const),
            chunks: Number(raw.linked_chunks ?? 0),
            sibling: raw.linked_sibling ?? "",
          },
        }
      : {}),
  };
}
