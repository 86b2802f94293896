import { bytesPerElement, FerryError, type ModelConfig, type TensorSpec } from "@ferry/protocol";
import type { BatchRunner, TensorData, TensorMap } from "@ferry/runtime";
import {
  type ExecutionStats,
  NOT_RUN,
  type PackedOutputs,
  type PackedRows,
} from "@ferry/transport";
import type { WorkerMetrics } from "../metrics.js";
import { allFinite, rowLength, view } from "./tensor-packing.js";

/** What running an offline chunk needs of the version serving it. */
export interface PackedServing {
  config: ModelConfig;
  version: string;
  runtime: BatchRunner;
  /** Runs a batch formed here on an instance live rows leave (the dynamic batcher's). */
  runWhole<R>(work: () => Promise<R>): Promise<R>;
  metrics: WorkerMetrics;
  stats: Pick<ExecutionStats, "execution">;
}

type RowErrors = PackedOutputs["errors"];

/** Batches handed to an instance in one message (each still max_batch_size rows at most). */
const BATCHES_PER_RUN = 8;

/**
 * An offline chunk's rows, packed back to back as ingestion stored them, run max_batch_size
 * at a time as whole batches: no row becomes an object, a base64 string or a promise of its
 * own, which at 2,048 rows a chunk was most of the worker's time. A row that is not finite,
 * or that fails the model by itself (a failed batch's rows are run one by one), fails alone.
 */
export async function runPackedChunk(s: PackedServing, chunk: PackedRows): Promise<PackedOutputs> {
  const { config } = s;
  const spec = config.inputs[0];
  if (!spec || config.inputs.length !== 1 || spec.name !== chunk.input)
    throw new FerryError(
      "INVALID_INPUT",
      `model ${config.name} takes offline batches for its one input; the chunk is for '${chunk.input}'`,
    );
  const rowBytes = chunk.rows.length / chunk.count;
  const expected = rowLength(spec.dims);
  const size = bytesPerElement[spec.datatype];
  if (!Number.isInteger(rowBytes) || (expected !== null && rowBytes !== expected * size))
    throw new FerryError(
      "INVALID_INPUT",
      `chunk of ${chunk.count} rows holds ${chunk.rows.length} bytes; ${config.name} takes ${expected ?? "whole"} ${spec.datatype} values a row`,
    );
  const errors: RowErrors = {};
  const runnable: number[] = [];
  for (let r = 0; r < chunk.count; r++) {
    const row = chunk.rows.subarray(r * rowBytes, (r + 1) * rowBytes);
    if (spec.datatype === "FP32" && !allFinite(row))
      errors[r] = { code: "INVALID_INPUT", message: `input '${spec.name}' has a non-finite value` };
    else runnable.push(r);
  }
  const blocks: number[][] = [];
  for (let at = 0; at < runnable.length; at += config.max_batch_size)
    blocks.push(runnable.slice(at, at + config.max_batch_size));
  // a few batches to an instance at a time, in one message each way, each batch still of
  // max_batch_size: a live row waits at most that many batches for the instance
  const groups: number[][][] = [];
  for (let at = 0; at < blocks.length; at += BATCHES_PER_RUN)
    groups.push(blocks.slice(at, at + BATCHES_PER_RUN));
  const outputs = (
    await Promise.all(
      groups.map((group) =>
        s.runWhole(async () =>
          // its batch cancelled while this group waited for an instance: not run
          chunk.stopped?.()
            ? notRun(group, errors)
            : runGroup(s, spec, chunk.rows, rowBytes, group, errors),
        ),
      ),
    )
  ).flat();
  const width =
    outputs.find((o) => o.width > 0)?.width ?? rowLength(config.outputs[0]?.dims ?? []) ?? 0;
  const values = new Float32Array(chunk.count * width);
  outputs.forEach((out, b) => {
    for (const [k, row] of (blocks[b] ?? []).entries())
      if (out.width === width)
        values.set(out.values.subarray(k * width, (k + 1) * width), row * width);
  });
  return { width, values, errors };
}

/**
 * Blocks of rows, each one batch, run one after another on one instance; a block that fails
 * is run again row by row, so that only the rows the model refuses fail.
 */
async function runGroup(
  s: PackedServing,
  spec: TensorSpec,
  rows: Buffer,
  rowBytes: number,
  group: number[][],
  errors: RowErrors,
): Promise<Array<{ width: number; values: Float32Array }>> {
  // a run that fails whole (the instance's thread lost) fails each block, run again alone
  const outcomes = await timed(s, group, () =>
    s.runtime.runMany(group.map((block) => feedOf(spec, rows, rowBytes, block))),
  ).catch((err: unknown) => group.map(() => (err instanceof Error ? err : new Error(String(err)))));
  const outputs: Array<{ width: number; values: Float32Array }> = [];
  for (const [b, block] of group.entries()) {
    const outcome = outcomes[b];
    let values: { width: number; values: Float32Array } | undefined;
    let failure: unknown = outcome;
    if (outcome && !(outcome instanceof Error)) {
      try {
        values = valuesOf(s, outcome, block.length);
      } catch (err) {
        failure = err;
      }
    }
    if (values) {
      outputs.push(values);
      countOk(s, block.length);
      continue;
    }
    if (block.length === 1) {
      errors[block[0] as number] = modelError(failure ?? new Error("no outcome"));
      outputs.push({ width: 0, values: new Float32Array(0) });
      continue;
    }
    outputs.push(await rowByRow(s, spec, rows, rowBytes, block, errors));
  }
  return outputs;
}

/** A group's rows answered as not run: their batch was cancelled before the group's turn. */
function notRun(
  group: number[][],
  errors: RowErrors,
): Array<{ width: number; values: Float32Array }> {
  for (const block of group)
    for (const row of block) errors[row] = { code: "CANCELLED", message: NOT_RUN };
  return group.map(() => ({ width: 0, values: new Float32Array(0) }));
}

/** A failed block's rows run alone: each gets its answer or its own error. */
async function rowByRow(
  s: PackedServing,
  spec: TensorSpec,
  rows: Buffer,
  rowBytes: number,
  block: number[],
  errors: RowErrors,
): Promise<{ width: number; values: Float32Array }> {
  let width = 0;
  const alone: Array<Float32Array | undefined> = [];
  for (const row of block) {
    try {
      const out = await timed(s, [[row]], () => s.runtime.run(feedOf(spec, rows, rowBytes, [row])));
      const values = valuesOf(s, out, 1);
      countOk(s, 1);
      width = values.width;
      alone.push(values.values);
    } catch (err) {
      errors[row] = modelError(err);
      alone.push(undefined);
    }
  }
  const values = new Float32Array(block.length * width);
  for (const [k, v] of alone.entries()) if (v) values.set(v, k * width);
  return { width, values };
}

/** The block's rows as the model's input (a copy the runtime's thread may take). */
function feedOf(spec: TensorSpec, rows: Buffer, rowBytes: number, block: number[]) {
  const bytes = new Uint8Array(block.length * rowBytes);
  const first = block[0] ?? 0;
  // consecutive rows in one move
  if (block.at(-1) === first + block.length - 1)
    bytes.set(rows.subarray(first * rowBytes, (first + block.length) * rowBytes));
  else
    for (const [k, row] of block.entries())
      bytes.set(rows.subarray(row * rowBytes, (row + 1) * rowBytes), k * rowBytes);
  const width = rowBytes / bytesPerElement[spec.datatype];
  const feed: TensorData = {
    data: view(spec.datatype, bytes.buffer),
    dims: [block.length, ...spec.dims.map((d) => (d < 0 ? width : d))],
  };
  return { [spec.name]: feed };
}

/** A batch's first output as FP32 rows. */
function valuesOf(
  s: PackedServing,
  outputs: TensorMap,
  count: number,
): { width: number; values: Float32Array } {
  const out = Object.values(outputs)[0];
  if (!out) throw new Error(`model ${s.config.name} gave no output`);
  const data = out.data;
  let values: Float32Array;
  if (data instanceof Float32Array) values = data;
  else {
    values = new Float32Array(data.length);
    for (let k = 0; k < data.length; k++) values[k] = Number(data[k]);
  }
  return { width: values.length / count, values };
}

/**
 * Runs `work` (the blocks' batches) under the version's metrics: each block a batch of its
 * size, the time they took together shared among them.
 */
async function timed<R>(s: PackedServing, blocks: number[][], work: () => Promise<R>): Promise<R> {
  const { config, version, metrics } = s;
  const labels = { model: config.name, version };
  const started = performance.now();
  try {
    return await work();
  } finally {
    const ms = (performance.now() - started) / blocks.length;
    for (const block of blocks) {
      metrics.batchSize.observe(labels, block.length);
      metrics.computeSeconds.observe(labels, ms / 1000);
      s.stats.execution(config.name, version, block.length, ms);
    }
  }
}

function countOk(s: PackedServing, rows: number): void {
  s.metrics.rows.inc({ model: s.config.name, version: s.version, outcome: "ok" }, rows);
}

function modelError(err: unknown): { code: string; message: string } {
  if (err instanceof FerryError) return { code: err.code, message: err.message };
  return { code: "MODEL_ERROR", message: err instanceof Error ? err.message : String(err) };
}
