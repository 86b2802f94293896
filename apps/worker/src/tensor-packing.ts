import type { OutputTensor, RowInputs, TensorSpec } from "@ferry/protocol";
import type { TensorData, TensorMap } from "@ferry/runtime";

/** Values in one row of a tensor with per-row `dims`; -1 axes make it variable (null). */
export function rowLength(dims: readonly number[]): number | null {
  return dims.some((d) => d < 0) ? null : dims.reduce((a, b) => a * b, 1);
}

/** Why a row does not fit the model's inputs, or undefined when it does. */
export function rowProblem(specs: readonly TensorSpec[], inputs: RowInputs): string | undefined {
  for (const spec of specs) {
    const values = inputs[spec.name];
    if (!values) return `missing input '${spec.name}'`;
    const expected = rowLength(spec.dims);
    if (expected !== null && values.length !== expected) {
      return `Expected ${expected} features, got ${values.length}`;
    }
    if (!values.every(Number.isFinite)) return `input '${spec.name}' has a non-finite value`;
  }
  return undefined;
}

/** Stacks rows into one batched tensor per input, in the typed array the datatype needs. */
export function packRows(specs: readonly TensorSpec[], rows: readonly RowInputs[]): TensorMap {
  const feeds: TensorMap = {};
  for (const spec of specs) {
    const width = rowLength(spec.dims) ?? rows[0]?.[spec.name]?.length ?? 0;
    const data = allocate(spec.datatype, rows.length * width);
    rows.forEach((row, r) => {
      const values = row[spec.name] ?? [];
      if (data instanceof BigInt64Array) {
        for (let k = 0; k < values.length; k++)
          data[r * width + k] = BigInt(Math.trunc(values[k] ?? 0));
      } else data.set(values, r * width);
    });
    feeds[spec.name] = { data, dims: [rows.length, ...spec.dims.map((d) => (d < 0 ? width : d))] };
  }
  return feeds;
}

/** Splits batched outputs back into one set of tensors per row. */
export function splitRows(outputs: TensorMap, n: number): Array<Record<string, OutputTensor>> {
  const rows: Array<Record<string, OutputTensor>> = Array.from({ length: n }, () => ({}));
  for (const [name, tensor] of Object.entries(outputs)) {
    const width = tensor.data.length / n;
    const dims = tensor.dims.slice(1);
    rows.forEach((row, r) => {
      row[name] = { dims, data: toNumbers(tensor.data, r * width, (r + 1) * width) };
    });
  }
  return rows;
}

function allocate(datatype: TensorSpec["datatype"], length: number): TensorData["data"] {
  switch (datatype) {
    case "FP64":
      return new Float64Array(length);
    case "INT64":
      return new BigInt64Array(length);
    case "INT32":
      return new Int32Array(length);
    default:
      return new Float32Array(length);
  }
}

function toNumbers(data: TensorData["data"], from: number, to: number): number[] {
  const out = new Array<number>(to - from);
  for (let k = from; k < to; k++) out[k - from] = Number(data[k]);
  return out;
}
