import type { ModelRepository } from "@ferry/model-repository";
import { BATCH_CHUNK_BYTES, BATCH_CHUNK_SIZE, bytesPerElement, FerryError } from "@ferry/protocol";
import type { BatchJobStatus, InferenceClient } from "@ferry/transport";
import { ADMIN_ID, assertVisible, type Tenant } from "../http/tenant.js";
import type { ParseThread } from "../parsing/parse-thread.js";
import { type ParsedJsonBatch, rowsBytes } from "./json-batch-body.js";
import type { ParsedRows, RowsSpec } from "./ndjson-rows.js";

/** Chunks queued at once while ingestion parses on: Redis's round trips overlap the parsing. */
const CHUNKS_IN_FLIGHT = 4;
/** Items of a parsed JSON body checked and queued at once: a chunk's worth between turns. */
const ROWS_AT_ONCE = 256;
/** Segments sent to the parse thread ahead of the one whose rows are taken: it never idles. */
const SEGMENTS_IN_FLIGHT = 2;

/**
 * Offline batch prediction (the seed's BatchPredictor): items are checked and encoded as they
 * arrive and queued a chunk at a time, so a batch of any size passes through the API in
 * bounded memory.
 */
export class BatchJobService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly parser: ParseThread,
    /** Bytes of rows one owner's batches may hold waiting to run (0: no limit). */
    private readonly rowsPerKeyBytes = 0,
  ) {}

  /**
   * A `{model, items}` body read on the parse thread (the buffer moves there); undefined
   * fingerprint unless `fingerprintHead` is given.
   */
  parseJson(bytes: Uint8Array, fingerprintHead?: string): Promise<ParsedJsonBatch> {
    return this.parser.jsonBatch(bytes, fingerprintHead);
  }

  /**
   * Ingests a `{model, items}` body the parse thread read (`parseJson`): its rows checked
   * against the model's input and queued ROWS_AT_ONCE items at a time; returns the batch id
   * and its size.
   */
  async ingestParsed(
    parsed: ParsedJsonBatch,
    owner: string,
    createdId?: string,
  ): Promise<{ id: string; total: number }> {
    const { model, version, keys, values, widths, bad } = parsed;
    // every item's shape checked before any is queued, as the schema checked them
    const { width } = this.rowsOf(model, version).spec;
    const features = `needs ${width} finite features`;
    const wrong = widths.findIndex((w) => w !== width);
    if (wrong >= 0) throw invalidItem(wrong + 1, features);
    if (bad) throw invalidItem(bad.item, bad.problem ?? features);
    return this.intoChunks(model, version, owner, createdId, undefined, async (spec, add) => {
      for (let from = 0; from < keys.length; from += ROWS_AT_ONCE) {
        const to = Math.min(keys.length, from + ROWS_AT_ONCE);
        const rows = values.subarray(from * spec.width, to * spec.width);
        await add(keys.slice(from, to), rowsBytes(spec, rows, from));
      }
      return keys.length;
    });
  }

  /** The fingerprint of the keyed upload that made batch `id`, if it had one. */
  fingerprint(id: string): Promise<string | undefined> {
    return this.client.batches.fingerprint(id);
  }

  /**
   * Ingests an NDJSON body cut into segments of whole lines (`ndjsonSegments`), each parsed
   * on the parse thread while the next arrives; returns the batch id and its size.
   * `fingerprint`: a keyed upload's, once its body is read whole: kept with the batch.
   */
  async ingestNdjson(
    model: string,
    version: string | undefined,
    segments: AsyncIterable<Uint8Array>,
    owner: string,
    createdId?: string,
    fingerprint?: () => string,
  ): Promise<{ id: string; total: number }> {
    return this.intoChunks(model, version, owner, createdId, fingerprint, async (spec, add) => {
      const parsing: Array<Promise<ParsedRows>> = [];
      let lines = 0;
      let total = 0;
      const take = async (parsed: ParsedRows) => {
        if (parsed.keys.length > 0) await add(parsed.keys, parsed.rows);
        const problem = parsed.problem;
        if (problem?.kind === "json")
          throw new FerryError("INVALID_INPUT", `line ${lines + problem.at} ${problem.message}`);
        if (problem?.kind === "item") throw invalidItem(total + problem.at, problem.message);
        if (problem) throw new FerryError("INVALID_INPUT", problem.message);
        lines += parsed.lines;
        total += parsed.items;
      };
      // a segment still parsing when the body or a line failed is left: its rows are not taken
      for await (const segment of segments) {
        const parsed = this.parser.rows(segment, spec);
        // handled now: it may fail (the thread lost) while the body is still being read
        parsed.catch(() => undefined);
        parsing.push(parsed);
        if (parsing.length >= SEGMENTS_IN_FLIGHT)
          await take(await (parsing.shift() as Promise<ParsedRows>));
      }
      while (parsing.length > 0) await take(await (parsing.shift() as Promise<ParsedRows>));
      return total;
    });
  }

  /**
   * Cancels a running batch (`POST /v1/batches/{id}/cancel`): its queued chunks go and their
   * rows are given back to its owner's budget at once; the rows answered so far stay in its
   * results. Cancelling one cancelled already answers it as it is; one still being uploaded
   * (its upload can be aborted instead) or completed is a 400.
   */
  async cancel(id: string, tenant: Tenant): Promise<BatchJobStatus> {
    const batches = this.client.batches;
    const notFound = () => new FerryError("NOT_FOUND", `Batch '${id}' not found`);
    const before = await batches.status(id);
    if (!before) throw notFound();
    assertVisible(tenant, before.owner, notFound);
    const found = await batches.cancel(id);
    if (found === undefined) throw notFound();
    if (found !== "cancelled")
      throw new FerryError(
        "INVALID_INPUT",
        found === "ingesting"
          ? `Cannot cancel batch '${id}' while it is still being uploaded: abort its upload instead`
          : `Cannot cancel a batch with status ${found}: it has finished its rows`,
      );
    // its rows left Redis with its chunks (those a worker held are read already)
    await this.client.batchRows.release(before.owner, id).catch(() => undefined);
    return (await batches.status(id)) ?? before;
  }

  /** What a batch's rows must be for `model` (its version resolved); throws for one that takes none. */
  private rowsOf(
    model: string,
    version: string | undefined,
  ): { spec: RowsSpec; version: string; input: string } {
    const { entry, version: v } = this.repository.resolve(model, version);
    const input = entry.config.inputs[0];
    if (entry.config.kind !== "classifier" || !input || entry.config.inputs.length !== 1) {
      throw new FerryError("INVALID_INPUT", `Model '${model}' does not take batch predictions`);
    }
    const spec: RowsSpec = {
      width: input.dims.reduce((a, b) => a * b, 1),
      datatype: input.datatype,
    };
    return { spec, version: v, input: input.name };
  }

  /**
   * Creates a batch and queues its rows a chunk at a time as `produce` adds them (keys, and
   * their rows packed back to back), then seals it; one that fails midway is discarded.
   */
  private async intoChunks(
    model: string,
    version: string | undefined,
    owner: string,
    createdId: string | undefined,
    fingerprint: (() => string) | undefined,
    produce: (
      spec: RowsSpec,
      add: (keys: readonly string[], rows: Uint8Array) => Promise<void>,
    ) => Promise<number>,
  ): Promise<{ id: string; total: number }> {
    const { spec, version: v, input } = this.rowsOf(model, version);
    const batches = this.client.batches;
    const id = await batches.create(model, v, owner, createdId);
    const adding = new ChunksInFlight(CHUNKS_IN_FLIGHT);
    const rowBytes = spec.width * bytesPerElement[spec.datatype];
    const perChunk = Math.max(
      1,
      Math.min(BATCH_CHUNK_SIZE, Math.floor(BATCH_CHUNK_BYTES / rowBytes)),
    );
    let keys: string[] = [];
    let rows: Uint8Array[] = [];
    let chunks = 0;
    // the batch's rows count against its owner's budget of rows waiting to run as they are
    // queued, until it completes (its worker gives them back) or expires: one key's uploads
    // cannot fill Redis with rows no worker has run (60 MB a 20,000-row mnist batch)
    let held = 0;
    const expiresAtS = Math.floor(Date.now() / 1000) + batches.keptForS;
    const queueChunk = async () => {
      // a chunk cut from one parsed segment is a view of it, not a copy
      const one = rows.length === 1 ? (rows[0] as Uint8Array) : undefined;
      const packed = one
        ? Buffer.from(one.buffer, one.byteOffset, one.byteLength)
        : Buffer.concat(rows);
      const chunk = { index: chunks++, input, keys, rows: packed };
      keys = [];
      rows = [];
      // the admin is held to no budget, as its files are not
      if (this.rowsPerKeyBytes > 0 && owner !== ADMIN_ID) {
        const bytes = packed.byteLength + keysBytes(chunk.keys);
        await this.client.batchRows.reserve(owner, id, held + bytes, expiresAtS, {
          maxBytes: this.rowsPerKeyBytes,
          maxItems: 0,
        });
        held += bytes;
      }
      return adding.add(batches.addChunk(id, model, v, owner, chunk).then(() => undefined));
    };
    // rows arrive a few at a time or a segment's worth at once: cut into chunks of perChunk
    const add = async (more: readonly string[], packed: Uint8Array) => {
      let from = 0;
      while (from < more.length) {
        const take = Math.min(perChunk - keys.length, more.length - from);
        for (let k = 0; k < take; k++) keys.push(more[from + k] as string);
        rows.push(packed.subarray(from * rowBytes, (from + take) * rowBytes));
        from += take;
        if (keys.length >= perChunk) await queueChunk();
      }
    };
    let total = 0;
    try {
      total = await produce(spec, add);
      if (keys.length > 0) await queueChunk();
      await adding.drained();
    } catch (err) {
      // a refused upload (a bad line, past its key's budget, a body cut off) creates nothing:
      // its caller gets no id to read it by, so what it had queued goes rather than runs
      // (a chunk a worker holds already ends, its batch sealed), and its rows are given back
      await adding.settled();
      await batches.discard(id, model, v, chunks).catch(() => undefined);
      await batches.forget(id).catch(() => undefined);
      await this.client.batchRows.release(owner, id).catch(() => undefined);
      throw err;
    }
    await batches.seal(id, model, v, fingerprint?.());
    if (total === 0) throw new FerryError("INVALID_INPUT", "a batch needs at least one item");
    return { id, total };
  }
}

/**
 * What a chunk's keys take in Redis while it waits: each key in its job's JSON, quoted. A key
 * of 512 characters is twice a digits row's bytes: 40,000 of them with their rows held 10 MB
 * of the budget and put 40 MB in Redis.
 */
function keysBytes(keys: readonly string[]): number {
  let bytes = 0;
  for (const key of keys) bytes += Buffer.byteLength(key) + KEY_OVERHEAD_BYTES;
  return bytes;
}

/** A key's quotes and comma in its chunk's job data, and its share of the job's own keys. */
const KEY_OVERHEAD_BYTES = 8;

/**
 * Chunks being queued while the next is parsed: parsing and Redis's round trips overlap, and at
 * most `size` chunks are held whatever the batch's size.
 */
export class ChunksInFlight {
  private readonly pending = new Set<Promise<void>>();
  private failure: { err: unknown } | undefined;

  constructor(private readonly size: number) {}

  /** Tracks `adding`; waits while `size` are in flight, and throws the first failure. */
  async add(adding: Promise<void>): Promise<void> {
    const tracked = adding.then(
      () => {
        this.pending.delete(tracked);
      },
      (err: unknown) => {
        this.pending.delete(tracked);
        this.failure ??= { err };
      },
    );
    this.pending.add(tracked);
    while (this.pending.size >= this.size) await Promise.race(this.pending);
    if (this.failure) throw this.failure.err;
  }

  /** Waits for every chunk; throws the first failure. */
  async drained(): Promise<void> {
    await this.settled();
    if (this.failure) throw this.failure.err;
  }

  /** Waits for every chunk, failed or not. */
  async settled(): Promise<void> {
    await Promise.all(this.pending);
  }
}

function invalidItem(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `item ${line} ${problem}`);
}

/** Limits on an NDJSON upload, enforced while it streams in. */
export interface NdjsonLimits {
  /** Bytes of the whole body. */
  maxBodyBytes: number;
  /** Bytes of one line (one item). */
  maxLineBytes: number;
}

const NEWLINE = 0x0a;

/** Bytes of whole lines the parse thread gets at a time. */
const SEGMENT_BYTES = 1 << 20;

/**
 * Cuts an NDJSON byte stream into segments of whole lines (about SEGMENT_BYTES each) in
 * bounded memory and linear time: each chunk is scanned for newlines once, and a body or a
 * line past its limit is refused (413) the moment it crosses it, before it is buffered whole.
 * Each segment is a buffer of its own, to move to the parse thread without a copy.
 */
export async function* ndjsonSegments(
  body: AsyncIterable<Uint8Array>,
  limits: NdjsonLimits,
): AsyncGenerator<Uint8Array> {
  /** Pieces since the last cut: whole lines, then the start of the next if any. */
  let parts: Uint8Array[] = [];
  let partsBytes = 0;
  /** Bytes of the line being read, and lines read so far. */
  let lineBytes = 0;
  let lines = 0;
  let bodyBytes = 0;
  const tooLong = () =>
    new FerryError(
      "PAYLOAD_TOO_LARGE",
      `line ${lines + 1} exceeds ${limits.maxLineBytes} bytes; one item per line`,
    );
  for await (const chunk of body) {
    bodyBytes += chunk.byteLength;
    if (bodyBytes > limits.maxBodyBytes)
      throw new FerryError(
        "PAYLOAD_TOO_LARGE",
        `NDJSON body exceeds ${limits.maxBodyBytes} bytes; split it into several batches`,
      );
    let start = 0;
    let last = -1;
    for (
      let newline = chunk.indexOf(NEWLINE);
      newline >= 0;
      newline = chunk.indexOf(NEWLINE, start)
    ) {
      if (lineBytes + newline - start > limits.maxLineBytes) throw tooLong();
      lines++;
      lineBytes = 0;
      last = newline;
      start = newline + 1;
    }
    lineBytes += chunk.byteLength - start;
    if (lineBytes > limits.maxLineBytes) throw tooLong();
    if (last >= 0 && partsBytes + last + 1 >= SEGMENT_BYTES) {
      parts.push(chunk.subarray(0, last + 1));
      yield joined(parts, partsBytes + last + 1);
      const rest = chunk.subarray(last + 1);
      parts = rest.byteLength > 0 ? [rest] : [];
      partsBytes = rest.byteLength;
    } else {
      parts.push(chunk);
      partsBytes += chunk.byteLength;
    }
  }
  if (partsBytes > 0) yield joined(parts, partsBytes);
}

/** `parts` copied into one buffer of its own. */
function joined(parts: readonly Uint8Array[], bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}
