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

/**
 * An output a request asked for, and how: Triton's classification extension (`classification`:
 * the top that many classes as "value:index[:label]" strings) or the tensor itself.
 */
export interface RequestedOutput {
  name: string;
  classification?: number;
}

/** What a request may say about an output: Triton's binary data and classification extensions. */
const OUTPUT_PARAMETERS = new Set(["binary_data", "classification"]);

/**
 * The outputs a request asked for (all when it named none, or an empty list, as Triton). An
 * unknown name, one asked for twice, or a parameter that would change the answer and that
 * Ferry lacks (Triton's shared memory...), is a 400.
 */
export function requestedOutputs(config: ModelConfig, body: V2InferRequest): RequestedOutput[] {
  if (!body.outputs?.length) return config.outputs.map((o) => ({ name: o.name }));
  const asked = new Set<string>();
  return body.outputs.map(({ name, parameters = {} }) => {
    const spec = config.outputs.find((o) => o.name === name);
    if (!spec) throw invalid(`unknown output '${name.slice(0, 64)}'`);
    // each is rendered in full: 100,000 of one name had answered 100,000 copies (a 500)
    if (asked.has(name)) throw invalid(`output '${name}' is asked for more than once`);
    asked.add(name);
    for (const key of Object.keys(parameters))
      if (!OUTPUT_PARAMETERS.has(key))
        throw invalid(`output '${name}': parameter '${key}' is not supported by this server`);
    const count = parameters.classification;
    if (count === undefined) return { name };
    const classes = spec.dims.reduce((a, b) => a * b, 1);
    if (!Number.isInteger(count) || (count as number) < 1 || (count as number) > classes)
      throw invalid(
        `output '${name}': classification must be a whole number from 1 to ${classes} (its classes)`,
      );
    return { name, classification: count as number };
  });
}

/** Stacks per-row outputs back into batched v2 output tensors (or their top classes). */
export function encodeV2Response(
  config: ModelConfig,
  version: string,
  id: string,
  outputs: ReadonlyArray<RequestedOutput | string>,
  rows: Array<Record<string, OutputTensor>>,
): V2InferResponse {
  return {
    model_name: config.name,
    model_version: version,
    id,
    outputs: outputs.map((asked) => {
      // an async job queued before outputs had parameters names them alone
      const { name, classification } = typeof asked === "string" ? { name: asked } : asked;
      if (classification !== undefined)
        return {
          name,
          datatype: "BYTES",
          shape: [rows.length, classification],
          data: rows.flatMap((r) => topClasses(r[name]?.data ?? [], classification, config.labels)),
        };
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

/**
 * A row's `count` highest values as Triton writes them: "value:index", with ":label" where the
 * model has labels, the value as C++'s std::to_string prints it (six decimals); ties go to
 * the lower index.
 */
function topClasses(
  values: readonly number[],
  count: number,
  labels?: readonly string[],
): string[] {
  const order = values
    .map((_, k) => k)
    .sort((a, b) => (values[b] as number) - (values[a] as number) || a - b);
  return order.slice(0, count).map((k) => {
    const label = labels?.[k];
    return `${(values[k] as number).toFixed(6)}:${k}${label === undefined ? "" : `:${label}`}`;
  });
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
