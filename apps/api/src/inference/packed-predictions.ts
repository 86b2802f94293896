import { FerryError, queueName, tensorToBytes } from "@ferry/protocol";
import { ChunkRun, type InferenceClient, type PackedChunk } from "@ferry/transport";
import { PACKED_ROW, type PackedRow } from "../http/batch-line.js";
import type { CallOptions } from "../http/call.js";
import type { PackedSource } from "../http/packed-lines.js";
import type { InferenceService } from "./inference-service.js";
import { modelPrediction, type Prediction } from "./prediction.js";
import type { PredictBody } from "./schemas.js";

/**
 * Many predict bodies for one model answered on the offline path: their rows packed into one
 * chunk, run as whole batches on a worker's instances live rows leave, the answers read back
 * in one value. What an OpenAI batch's predict lines take instead of a sync request each: no
 * cache lookup or fallback (a batch's rows are new inputs), one version drawn by the traffic
 * split for the chunk, the batch's window as the deadline. One `PackedRun` per run of a batch:
 * its chunks share one offline batch per model version.
 */
export class PackedPredictions {
  constructor(
    private readonly inference: InferenceService,
    private readonly client: InferenceClient,
  ) {}

  /** A batch run's predictions, for `owner`; close it when the run ends. */
  open(owner: string): PackedRun {
    return new PackedRun(this.inference, this.client, new ChunkRun(this.client.batches, owner));
  }
}

/** Rows of features, read where they are: `count` of them, row k as `features(k)`. */
export interface FeatureRows {
  count: number;
  /** Row k's number of features (without reading them). */
  width(k: number): number;
  features(k: number): readonly number[] | Float32Array;
  /** Makes the rows readable by `features` (rows that lie elsewhere are read first). */
  load?(): Promise<void>;
  /**
   * Where every row, in order, lies packed (a batch input file's chunks, as its upload packed
   * them): the worker reads them there, where every row fits the model, rather than be sent
   * their FP32 values.
   */
  source?: PackedSource;
}

/** The predictions of one run of a batch (`PackedPredictions.open`). */
export class PackedRun {
  constructor(
    private readonly inference: InferenceService,
    private readonly client: InferenceClient,
    private readonly chunks: ChunkRun,
  ) {}

  /** Ends the run; `stopped`: it was cancelled, and what is still queued of it goes. */
  close(stopped: boolean): Promise<void> {
    return this.chunks.close(stopped);
  }

  /** Each body's prediction or its error, in order; undefined once `signal` stopped the wait. */
  run(
    model: string,
    bodies: readonly PredictBody[],
    opts: CallOptions,
    signal: AbortSignal,
  ): Promise<Array<PackedPrediction | FerryError> | undefined> {
    const rows = {
      count: bodies.length,
      width: (k: number) => bodies[k]?.features.length ?? 0,
      features: (k: number) => bodies[k]?.features ?? [],
    };
    return this.runRows(model, rows, opts, signal);
  }

  /**
   * Each row's prediction or its error, in order, the rows read where they are (a batch input
   * file's packed lines: no body per line); undefined once `signal` stopped the wait.
   */
  async runRows(
    model: string,
    rows: FeatureRows,
    opts: CallOptions,
    signal: AbortSignal,
  ): Promise<Array<PackedPrediction | FerryError> | undefined> {
    const started = performance.now();
    const version = await this.inference.routeVersion(model, undefined);
    const { entry } = this.inference.resolveClassifier(model, version);
    const spec = entry.config.inputs[0];
    if (!spec || entry.config.inputs.length !== 1)
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${model}' takes several inputs; use /v2/models/${model}/infer`,
      );
    const width = spec.dims.reduce((a, b) => a * b, 1);
    const answers: Array<PackedPrediction | FerryError | undefined> = new Array(rows.count);
    const keys: string[] = [];
    const packed: Uint8Array[] = [];
    let wrong = 0;
    for (let k = 0; k < rows.count; k++) {
      const given = rows.width(k);
      if (given === width) continue;
      answers[k] = new FerryError("INVALID_INPUT", `Expected ${width} features, got ${given}`);
      wrong++;
    }
    // every row fits an FP32 input: the worker reads them where they lie, and decodes them
    const source = wrong === 0 && spec.datatype === "FP32" ? rows.source : undefined;
    if (!source) await rows.load?.();
    for (let k = 0; k < rows.count; k++) {
      if (source) {
        keys.push(String(k));
        continue;
      }
      if (answers[k] !== undefined) continue;
      const features = rows.features(k);
      try {
        // FP32 rows already (packed lines): their bytes as they are
        packed.push(
          features instanceof Float32Array && spec.datatype === "FP32"
            ? new Uint8Array(features.buffer, features.byteOffset, features.byteLength)
            : tensorToBytes(spec.datatype, Array.isArray(features) ? features : [...features]),
        );
        keys.push(String(k));
      } catch (err) {
        answers[k] = err as FerryError;
      }
    }
    if (keys.length > 0) {
      await this.served(model, version, entry.config.default_timeout_ms, signal);
      const chunk: Omit<PackedChunk, "index"> = source
        ? { input: spec.name, keys, file: { id: source.file, chunks: source.chunks } }
        : { input: spec.name, keys, rows: Buffer.concat(packed) };
      const deadline = Date.now() + (opts.timeoutMs ?? entry.config.default_timeout_ms);
      const run = () => this.chunks.run(model, version, chunk, signal, deadline);
      // A chunk failed for good (every row failed with no values) is most often one a worker
      // died holding alone, which custody takes for a poison chunk: run once more, so that
      // one lost worker does not fail 2,048 lines; a chunk that fails twice fails its lines.
      let out = await run();
      if (out && out.width === 0 && Object.keys(out.errors).length === keys.length)
        out = await run();
      if (!out) return undefined;
      const latency = Math.round((performance.now() - started) * 100) / 100;
      for (const [r, key] of keys.entries()) {
        const error = out.errors[r];
        if (error) {
          answers[Number(key)] = new FerryError(error.code as FerryError["code"], error.message);
          continue;
        }
        answers[Number(key)] = new PackedPrediction(out.values, out.width, r, version, latency);
      }
    }
    return answers as Array<PackedPrediction | FerryError>;
  }

  /**
   * Waits, up to a predict's own timeout, for a worker to serve the version: a chunk queued
   * for a model no worker serves would wait out the whole batch window (an hour a group),
   * where a predict line sent alone fails in its timeout.
   */
  private async served(
    model: string,
    version: string,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<void> {
    const queue = queueName(model, version);
    const until = Date.now() + timeoutMs;
    for (;;) {
      const live = await this.client.workers.live();
      if (live.some((w) => w.queues.includes(queue))) return;
      if (signal.aborted || Date.now() >= until)
        throw new FerryError(
          "UNAVAILABLE",
          `no worker serves model '${model}' version ${version}; the lines were not run`,
          { retryAfterS: 5 },
        );
      await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, until - Date.now()))));
    }
  }
}

/** One row's prediction as its chunk's values hold it (`PackedRow`): the predict route's answer. */
export class PackedPrediction implements PackedRow {
  readonly [PACKED_ROW] = true as const;

  constructor(
    /** The chunk's values, `width` a row (shared by its rows). */
    readonly values: Float32Array,
    readonly width: number,
    readonly row: number,
    readonly version: string,
    readonly latencyMs: number,
  ) {}

  toJSON(): Prediction {
    const { values, width, row } = this;
    const logits = Array.from(values.subarray(row * width, (row + 1) * width));
    return modelPrediction(logits, this.version, this.latencyMs);
  }
}
