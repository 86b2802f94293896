import type { Datatype, TensorSpec } from "@ferry/protocol";
import {
  describeTensor,
  type GraphSignature,
  type GraphTensor,
  listTensors,
} from "./graph-signature.js";
import type { LmShape } from "./lm-messages.js";

/**
 * A model version whose model.json does not describe its ONNX graph. ONNX Runtime loads such a
 * graph without a word and fails every run instead ("input 'x' is missing in 'feeds'"), so the
 * version is refused at load: its message is the one line that names the mismatch.
 */
export class GraphMismatchError extends Error {
  override readonly name = "GraphMismatchError";
}

/** What a model.json says of its graph's tensors (dims per row, batch axis left out). */
export interface DeclaredTensors {
  inputs: readonly TensorSpec[];
  outputs: readonly TensorSpec[];
}

/** ONNX Runtime's element type for each model.json datatype. */
const ORT_TYPE: Record<Datatype, string> = {
  FP32: "float32",
  FP64: "float64",
  INT64: "int64",
  INT32: "int32",
  BOOL: "bool",
  BYTES: "string",
};

/**
 * The first way a classifier's model.json misdescribes its graph (`file`, as messages name
 * it), or undefined. Besides each declared tensor, every graph input must be declared: the
 * worker feeds a classifier only the inputs model.json names.
 */
export function classifierMismatch(
  declared: DeclaredTensors & { max_batch_size: number },
  graph: GraphSignature,
  file: string,
): string | undefined {
  const names = new Set(declared.inputs.map((spec) => spec.name));
  const unfed = graph.inputs.find((tensor) => !names.has(tensor.name));
  return (
    declaredMismatch(declared, graph, file, declared.max_batch_size) ??
    (unfed &&
      `${file} input ${describeTensor(unfed)} is not in model.json's inputs, so it would never be fed`)
  );
}

/**
 * The first way a generator's model.json misdescribes its graph, or undefined: its declared
 * tensors, then the layout the LM thread feeds and reads (Optimum's names, a KV cache of
 * `shape.layers` layers of float32 [batch, kv heads, sequence, head_dim]).
 */
export function generatorMismatch(
  declared: DeclaredTensors,
  shape: LmShape,
  graph: GraphSignature,
  file: string,
): string | undefined {
  return declaredMismatch(declared, graph, file, undefined) ?? kvLayoutMismatch(shape, graph, file);
}

/** Each tensor model.json declares against the graph's (`maxBatch`: a classifier's batch size). */
export function declaredMismatch(
  declared: DeclaredTensors,
  graph: GraphSignature,
  file: string,
  maxBatch: number | undefined,
): string | undefined {
  for (const side of ["input", "output"] as const) {
    const tensors = side === "input" ? graph.inputs : graph.outputs;
    for (const spec of side === "input" ? declared.inputs : declared.outputs) {
      const tensor = tensors.find((t) => t.name === spec.name);
      const mismatch = tensor
        ? specMismatch(side, spec, tensor, file, maxBatch)
        : `model.json ${side} '${spec.name}' is not in ${file} (its ${side}s: ${listTensors(tensors)})`;
      if (mismatch) return mismatch;
    }
  }
  return undefined;
}

function specMismatch(
  side: "input" | "output",
  spec: TensorSpec,
  tensor: GraphTensor,
  file: string,
  maxBatch: number | undefined,
): string | undefined {
  const has = `${file} has ${describeTensor(tensor)}`;
  const dims = `[${spec.dims.join(",")}]`;
  if (tensor.type !== ORT_TYPE[spec.datatype])
    return `model.json ${side} '${spec.name}' is ${spec.datatype} (${ORT_TYPE[spec.datatype]}), but ${has}`;
  const shape = tensor.shape;
  if (!shape) return undefined;
  if (shape.length !== spec.dims.length + 1)
    return `model.json ${side} '${spec.name}' has dims ${dims} (rank ${spec.dims.length + 1} with the batch axis), but ${has} (rank ${shape.length})`;
  // a classifier's batch holds 1 to max_batch_size rows, a generator's up to max_num_seqs
  const fixed = shape[0] ?? -1;
  if (fixed >= 0 && !(fixed === 1 && maxBatch === 1))
    return `${file} ${side} ${describeTensor(tensor)} has a fixed batch axis; ${maxBatch ? `max_batch_size ${maxBatch}` : "scheduler.max_num_seqs"} needs its first axis variable (a dynamic axis at export)`;
  // a fixed axis model.json leaves open would let the API pass rows the graph refuses; an
  // output's open axis is only less said
  const differs = spec.dims.some((d, i) => {
    const g = shape[i + 1] ?? -1;
    return g >= 0 && d !== g && (d >= 0 || side === "input");
  });
  return differs ? `model.json ${side} '${spec.name}' has dims ${dims}, but ${has}` : undefined;
}

/** Names the LM thread feeds besides the KV cache: [batch, tokens] of int64 each. */
const TOKEN_INPUTS = ["input_ids", "attention_mask", "position_ids"];
const KV_INPUT = /^past_key_values\.\d+\.(key|value)$/;

function kvLayoutMismatch(shape: LmShape, graph: GraphSignature, file: string): string | undefined {
  const layers = Array.from({ length: shape.layers }, (_, layer) => layer);
  const kvNames = (prefix: string) =>
    layers.flatMap((layer) => [`${prefix}.${layer}.key`, `${prefix}.${layer}.value`]);
  const fed = [...TOKEN_INPUTS, ...kvNames("past_key_values")];
  const naming = `(Optimum's naming for architecture.n_layer ${shape.layers}: input_ids, attention_mask, position_ids, past_key_values.0..${shape.layers - 1}.key|value`;
  for (const name of fed) {
    const tensor = graph.inputs.find((t) => t.name === name);
    if (!tensor)
      return `${file} has no input '${name}' ${naming}; its inputs: ${listTensors(graph.inputs)})`;
    const wrong = TOKEN_INPUTS.includes(name)
      ? tokenMismatch(tensor)
      : kvMismatch(tensor, shape, "input");
    if (wrong) return `${file} input ${describeTensor(tensor)} ${wrong}`;
  }
  for (const tensor of graph.inputs) {
    if (fed.includes(tensor.name)) continue;
    return KV_INPUT.test(tensor.name)
      ? `${file} input '${tensor.name}' is a KV cache layer past architecture.n_layer ${shape.layers}: the graph has more layers than model.json says`
      : `${file} input ${describeTensor(tensor)} is not one the worker feeds a generator ${naming})`;
  }
  for (const name of ["logits", ...kvNames("present")]) {
    const tensor = graph.outputs.find((t) => t.name === name);
    if (!tensor)
      return `${file} has no output '${name}' (Optimum's naming: logits, present.0..${shape.layers - 1}.key|value; its outputs: ${listTensors(graph.outputs)})`;
    const wrong =
      name === "logits" ? logitsMismatch(tensor, shape) : kvMismatch(tensor, shape, "output");
    if (wrong) return `${file} output ${describeTensor(tensor)} ${wrong}`;
  }
  return undefined;
}

function tokenMismatch(tensor: GraphTensor): string | undefined {
  if (tensor.type !== "int64") return "is not int64, which the worker feeds";
  if (tensor.shape && tensor.shape.length !== 2) return "is not [batch, tokens] (rank 2)";
  if ((tensor.shape?.[0] ?? -1) >= 0) return batchFixed;
  return undefined;
}

const batchFixed =
  "has a fixed batch axis; the engine batches up to scheduler.max_num_seqs sequences";

/** A KV tensor as the worker keeps it: float32 [batch, kv heads, sequence, head_dim]. */
function kvMismatch(
  tensor: GraphTensor,
  shape: LmShape,
  side: "input" | "output",
): string | undefined {
  if (tensor.type !== "float32") return "is not float32, as the worker keeps its KV cache";
  const dims = tensor.shape;
  if (!dims) return undefined;
  if (dims.length !== 4) return "is not [batch, heads, sequence, head_dim] (rank 4)";
  if ((dims[0] ?? -1) >= 0 && side === "input") return batchFixed;
  const [, heads = -1, , headDim = -1] = dims;
  if (heads >= 0 && heads !== shape.kvHeads)
    return `has ${heads} KV heads, but architecture.n_kv_head (else n_head) says ${shape.kvHeads}`;
  if (headDim >= 0 && headDim !== shape.headDim)
    return `has heads of ${headDim}, but architecture.head_dim says ${shape.headDim}`;
  return undefined;
}

function logitsMismatch(tensor: GraphTensor, shape: LmShape): string | undefined {
  if (tensor.type !== "float32") return "is not float32, as the sampler reads it";
  const dims = tensor.shape;
  if (!dims) return undefined;
  if (dims.length !== 3) return "is not [batch, tokens, vocabulary] (rank 3)";
  const vocab = dims[2] ?? -1;
  if (vocab >= 0 && vocab !== shape.vocab)
    return `scores ${vocab} tokens, but architecture.vocab_size says ${shape.vocab}`;
  return undefined;
}
