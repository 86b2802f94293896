import type { ModelRepository } from "@ferry/model-repository";
import {
  BATCH_CHUNK_BYTES,
  BATCH_CHUNK_SIZE,
  bytesPerElement,
  FerryError,
  type StoredBatchRow,
  tensorToBytes,
} from "@ferry/protocol";
import type { BatchJobStatus, InferenceClient } from "@ferry/transport";
import { assertVisible, type Tenant } from "../http/tenant.js";
import type { classify } from "../inference/classify.js";

/** Chunks queued at once while ingestion parses on: Redis's round trips overlap the parsing. */
const CHUNKS_IN_FLIGHT = 4;

/** One line of a batch: a key and the model's input row. */
export interface RawItem {
  key: unknown;
  features: unknown;
}

/**
 * Offline batch prediction (the seed's BatchPredictor): items are checked and encoded as they
 * arrive and queued a chunk at a time, so a batch of any size passes through the API in
 * bounded memory.
 */
export class BatchJobService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
  ) {}

  /** Ingests `items` (an async stream of raw items); returns the batch id and its size. */
  async ingest(
    model: string,
    version: string | undefined,
    items: AsyncIterable<RawItem>,
    owner: string,
    /** The batch's id when the request names one (its Idempotency-Key's). */
    createdId?: string,
  ): Promise<{ id: string; total: number }> {
    const { entry, version: v } = this.repository.resolve(model, version);
    const spec = entry.config.inputs[0];
    if (entry.config.kind !== "classifier" || !spec || entry.config.inputs.length !== 1) {
      throw new FerryError("INVALID_INPUT", `Model '${model}' does not take batch predictions`);
    }
    const width = spec.dims.reduce((a, b) => a * b, 1);
    const batches = this.client.batches;
    const id = await batches.create(model, v, owner, createdId);
    const adding = new ChunksInFlight(CHUNKS_IN_FLIGHT);
    const rowBytes = width * bytesPerElement[spec.datatype];
    const perChunk = Math.max(
      1,
      Math.min(BATCH_CHUNK_SIZE, Math.floor(BATCH_CHUNK_BYTES / rowBytes)),
    );
    let keys: string[] = [];
    let rows: Buffer[] = [];
    let chunks = 0;
    const queueChunk = () => {
      const chunk = { index: chunks++, input: spec.name, keys, rows: Buffer.concat(rows) };
      keys = [];
      rows = [];
      return adding.add(batches.addChunk(id, model, v, owner, chunk));
    };
    let total = 0;

    try {
      for await (const raw of items) {
        total++;
        const features = raw.features;
        if (typeof raw.key !== "string" || raw.key === "")
          throw invalidItem(total, "needs a string key");
        if (
          !Array.isArray(features) ||
          features.length !== width ||
          !features.every((x) => typeof x === "number" && Number.isFinite(x))
        ) {
          throw invalidItem(total, `needs ${width} finite features`);
        }
        keys.push(raw.key);
        rows.push(tensorToBytes(spec.datatype, features as number[]));
        if (keys.length >= perChunk) await queueChunk();
      }
      if (keys.length > 0) await queueChunk();
      await adding.drained();
    } finally {
      // what was queued runs either way; the batch completes with the items it took
      await adding.settled();
      await batches.seal(id, model, v);
    }
    if (total === 0) throw new FerryError("INVALID_INPUT", "a batch needs at least one item");
    return { id, total };
  }
}

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

type Classify = typeof classify;

/** Status, results and stored predictions, each visible to the tenant that made them. */
export class BatchJobReader {
  /** `classify` reads a stored row's logits as predict's answers read them. */
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly classify: Classify,
  ) {}

  async status(id: string, tenant: Tenant): Promise<BatchJobStatus> {
    const status = await this.client.batches.status(id);
    const notFound = () => new FerryError("NOT_FOUND", `Batch '${id}' not found`);
    if (!status) throw notFound();
    assertVisible(tenant, status.owner, notFound);
    return status;
  }

  /** The batch's result lines (NDJSON, a prediction or an error per key), a page at a time. */
  async results(id: string, tenant: Tenant): Promise<AsyncGenerator<string[]>> {
    await this.status(id, tenant);
    const pages = this.client.batches.results(id);
    const classify = this.classify;
    return (async function* () {
      for await (const rows of pages)
        yield rows.map((row) => JSON.stringify(render(row, classify)));
    })();
  }

  /**
   * The stored answer for `key`, from the tenant's own batches; the admin names whose with
   * `owner` (a tenant id, as batch statuses show it), else reads the open tenant's.
   */
  async prediction(model: string, key: string, tenant: Tenant, owner?: string) {
    this.repository.get(model);
    const scope = tenant.admin ? (owner ?? "") : tenant.id;
    const stored = await this.client.batches.prediction(model, key, scope);
    if (!stored)
      throw new FerryError("NOT_FOUND", `No stored prediction for '${key}' of model '${model}'`);
    return render(stored, this.classify);
  }
}

/** A stored row as clients read it: the prediction from its logits, or its error. */
function render(row: StoredBatchRow, classify: Classify): Record<string, unknown> {
  if (!("logits" in row)) return row;
  const { logits, ...rest } = row;
  return {
    key: rest.key,
    ...classify(logits),
    model_version: rest.model_version,
    batch: rest.batch,
  };
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

/**
 * Parses an NDJSON byte stream line by line in bounded memory and linear time: each chunk is
 * scanned for newlines once, a partial line is held as the chunks it came in (never re-joined
 * or re-scanned as more arrive), and a body or a line past its limit is refused (413) the
 * moment it crosses it, before it is buffered whole.
 */
export async function* ndjsonItems(
  body: AsyncIterable<Uint8Array>,
  limits: NdjsonLimits,
): AsyncGenerator<RawItem> {
  const decoder = new TextDecoder();
  let partial: Uint8Array[] = [];
  let partialBytes = 0;
  let bodyBytes = 0;
  let line = 0;
  const parse = (bytes: Uint8Array): RawItem | undefined => {
    line++;
    const text = decoder.decode(bytes).trim();
    if (!text) return undefined;
    try {
      return JSON.parse(text) as RawItem;
    } catch {
      throw new FerryError("INVALID_INPUT", `line ${line} is not valid JSON`);
    }
  };
  const take = (piece: Uint8Array): Uint8Array => {
    const whole = partial.length === 0 ? piece : Buffer.concat([...partial, piece]);
    partial = [];
    partialBytes = 0;
    return whole;
  };
  const tooLong = () =>
    new FerryError(
      "PAYLOAD_TOO_LARGE",
      `line ${line + 1} exceeds ${limits.maxLineBytes} bytes; one item per line`,
    );
  for await (const chunk of body) {
    bodyBytes += chunk.byteLength;
    if (bodyBytes > limits.maxBodyBytes)
      throw new FerryError(
        "PAYLOAD_TOO_LARGE",
        `NDJSON body exceeds ${limits.maxBodyBytes} bytes; split it into several batches`,
      );
    let start = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      if (partialBytes + newline - start > limits.maxLineBytes) throw tooLong();
      const item = parse(take(chunk.subarray(start, newline)));
      if (item !== undefined) yield item;
      start = newline + 1;
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.byteLength) {
      partial.push(chunk.subarray(start));
      partialBytes += chunk.byteLength - start;
      if (partialBytes > limits.maxLineBytes) throw tooLong();
    }
  }
  if (partialBytes > 0) {
    const item = parse(take(new Uint8Array(0)));
    if (item !== undefined) yield item;
  }
}
