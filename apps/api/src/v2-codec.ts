import {
  type Datatype,
  encodeTensor,
  FerryError,
  type ModelConfig,
  type OutputTensor,
  type RowInputs,
} from "@ferry/protocol";
import { MAX_DATA_DEPTH, type V2InferRequest, type V2InferResponse } from "./schemas.js";

/** Flattens KServe v2 `data` (checked by the schema: nested at most MAX_DATA_DEPTH deep). */
export function flatten(data: unknown[]): number[] {
  return data.flat(MAX_DATA_DEPTH) as number[];
}

/**
 * Checks a v2 request against the model's inputs and splits it into one RowInputs per batch
 * row. Every mismatch is a 400 that names the tensor and what was expected.
 */
export function decodeV2Rows(config: ModelConfig, body: V2InferRequest): RowInputs[] {
  let batch: number | undefined;
  const columns = new Map<string, { values: number[]; width: number; datatype: Datatype }>();
  for (const spec of config.inputs) {
    const input = body.inputs.find((i) => i.name === spec.name);
    if (!input) throw invalid(`missing input '${spec.name}'`);
    if (input.datatype !== spec.datatype) {
      throw invalid(
        `input '${spec.name}' has datatype ${input.datatype}, expected ${spec.datatype}`,
      );
    }
    const [rows, ...rest] = input.shape;
    const wantShape = `[-1,${spec.dims.join(",")}]`;
    const shapeOk =
      rows !== undefined &&
      rest.length === spec.dims.length &&
      spec.dims.every((d, k) => d < 0 || d === rest[k]);
    if (!shapeOk)
      throw invalid(
        `input '${spec.name}' has shape [${input.shape.join(",")}], expected ${wantShape}`,
      );
    if (rows > config.max_batch_size) {
      throw invalid(
        `input '${spec.name}' has ${rows} rows, more than max_batch_size ${config.max_batch_size}`,
      );
    }
    if (batch !== undefined && rows !== batch) throw invalid("inputs disagree on the batch size");
    batch = rows;
    const values = flatten(input.data);
    const expected = input.shape.reduce((a, b) => a * b, 1);
    if (values.length !== expected) {
      throw invalid(
        `input '${spec.name}' has ${values.length} values, shape [${input.shape.join(",")}] needs ${expected}`,
      );
    }
    columns.set(spec.name, {
      values,
      width: rows === 0 ? 0 : expected / rows,
      datatype: spec.datatype,
    });
  }
  const seen = new Set<string>();
  for (const input of body.inputs) {
    if (!config.inputs.some((s) => s.name === input.name))
      throw invalid(`unknown input '${input.name}'`);
    if (seen.has(input.name)) throw invalid(`input '${input.name}' is given more than once`);
    seen.add(input.name);
  }
  if (!batch) throw invalid("batch size must be at least 1");
  return Array.from({ length: batch }, (_, r) => {
    const row: RowInputs = {};
    for (const [name, { values, width, datatype }] of columns) {
      row[name] = encodeTensor(datatype, values.slice(r * width, (r + 1) * width));
    }
    return row;
  });
}

/** The output names a request asked for (all when it named none); unknown names are a 400. */
export function requestedOutputs(config: ModelConfig, body: V2InferRequest): string[] {
  const known = config.outputs.map((o) => o.name);
  if (!body.outputs) return known;
  for (const o of body.outputs)
    if (!known.includes(o.name)) throw invalid(`unknown output '${o.name}'`);
  return body.outputs.map((o) => o.name);
}

/** Stacks per-row outputs back into batched v2 output tensors. */
export function encodeV2Response(
  config: ModelConfig,
  version: string,
  id: string,
  names: string[],
  rows: Array<Record<string, OutputTensor>>,
): V2InferResponse {
  return {
    model_name: config.name,
    model_version: version,
    id,
    outputs: names.map((name) => {
      const first = rows[0]?.[name];
      const datatype = config.outputs.find((o) => o.name === name)?.datatype ?? "FP32";
      return {
        name,
        datatype,
        shape: [rows.length, ...(first?.dims ?? [])],
        data: rows.flatMap((r) => r[name]?.data ?? []),
      };
    }),
  };
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
