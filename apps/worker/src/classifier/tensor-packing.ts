import {
  bytesPerElement,
  type OutputTensor,
  type RowInputs,
  type TensorSpec,
  tensorBytes,
} from "@ferry/protocol";
import type { TensorData, TensorMap } from "@ferry/runtime";

/** Values in one row of a tensor with per-row `dims`; -1 axes make it variable (null). */
export function rowLength(dims: readonly number[]): number | null {
  return dims.some((d) => d < 0) ? null : dims.reduce((a, b) => a * b, 1);
}

/** One row's inputs as bytes, checked against the model's inputs. */
export type DecodedRow = Record<string, Buffer>;

/** Decodes a row, or says why it does not fit the model's inputs. */
export function decodeInputRow(
  specs: readonly TensorSpec[],
  inputs: RowInputs,
): DecodedRow | string {
  const row: DecodedRow = {};
  for (const spec of specs) {
    const encoded = inputs[spec.name];
    if (encoded === undefined) return `missing input '${spec.name}'`;
    const bytes = tensorBytes(encoded);
    const size = bytesPerElement[spec.datatype];
    const expected = rowLength(spec.dims);
    if (bytes.length % size !== 0 || (expected !== null && bytes.length !== expected * size)) {
      return `Expected ${expected ?? "a whole number of"} features, got ${bytes.length / size}`;
    }
    if (spec.datatype === "FP32" && !allFinite(bytes))
      return `input '${spec.name}' has a non-finite value`;
    row[spec.name] = bytes;
  }
  return row;
}

/** Stacks decoded rows into one batched tensor per input by copying their bytes. */
export function packRows(specs: readonly TensorSpec[], rows: readonly DecodedRow[]): TensorMap {
  const feeds: TensorMap = {};
  for (const spec of specs) {
    const size = bytesPerElement[spec.datatype];
    const rowBytes = rows[0]?.[spec.name]?.length ?? 0;
    const bytes = new Uint8Array(rows.length * rowBytes);
    rows.forEach((row, r) => {
      const src = row[spec.name];
      if (src) bytes.set(src, r * rowBytes);
    });
    const width = rowBytes / size;
    feeds[spec.name] = {
      data: view(spec.datatype, bytes.buffer),
      dims: [rows.length, ...spec.dims.map((d) => (d < 0 ? width : d))],
    };
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

/** Whether every FP32 value of `bytes` (a whole number of them) is finite. */
export function allFinite(bytes: Uint8Array): boolean {
  // read in place: a decoded row sits 8-byte aligned in Node's buffer pool; a copy only for
  // bytes that are not 4-byte aligned, which a Float32Array cannot view
  const floats =
    bytes.byteOffset % 4 === 0
      ? new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)
      : new Float32Array(new Uint8Array(bytes).buffer);
  for (let i = 0; i < floats.length; i++) if (!Number.isFinite(floats[i])) return false;
  return true;
}

/** The typed array a datatype's bytes are read as. */
export function view(datatype: TensorSpec["datatype"], buffer: ArrayBuffer): TensorData["data"] {
  switch (datatype) {
    case "FP64":
      return new Float64Array(buffer);
    case "INT64":
      return new BigInt64Array(buffer);
    case "INT32":
      return new Int32Array(buffer);
    case "BOOL":
    case "BYTES":
      return new Uint8Array(buffer);
    default:
      return new Float32Array(buffer);
  }
}

function toNumbers(data: TensorData["data"], from: number, to: number): number[] {
  const out = new Array<number>(to - from);
  for (let k = from; k < to; k++) out[k - from] = Number(data[k]);
  return out;
}
