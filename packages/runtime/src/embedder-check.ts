import { type DeclaredTensors, declaredMismatch } from "./graph-check.js";
import {
  describeTensor,
  type GraphSignature,
  type GraphTensor,
  listTensors,
} from "./graph-signature.js";

/** What the worker feeds an embedder: int64 [batch, sequence] each, the last only if the graph has it. */
const FED = ["input_ids", "attention_mask", "token_type_ids"];
const REQUIRED = ["input_ids", "attention_mask"];

/**
 * The first way an embedder's model.json misdescribes its graph, or undefined: its declared
 * tensors, then the layout the worker feeds and pools (BERT's names as Optimum exports them:
 * input_ids and attention_mask, token_type_ids where the graph has it, int64 [batch, sequence];
 * its first output float32 [batch, sequence, hidden], or already pooled [batch, hidden], of the
 * hidden width model.json's output says).
 */
export function embedderMismatch(
  declared: DeclaredTensors & { max_batch_size: number },
  graph: GraphSignature,
  file: string,
): string | undefined {
  const declaredWrong = declaredMismatch(declared, graph, file, declared.max_batch_size);
  if (declaredWrong) return declaredWrong;
  for (const name of REQUIRED)
    if (!graph.inputs.some((t) => t.name === name))
      return `${file} has no input '${name}' (an embedder is fed input_ids, attention_mask and, where the graph has it, token_type_ids; its inputs: ${listTensors(graph.inputs)})`;
  for (const tensor of graph.inputs) {
    if (!FED.includes(tensor.name))
      return `${file} input ${describeTensor(tensor)} is not one the worker feeds an embedder (input_ids, attention_mask, token_type_ids)`;
    const wrong = sequenceMismatch(tensor, "int64, which the worker feeds");
    if (wrong) return `${file} input ${describeTensor(tensor)} ${wrong}`;
  }
  const spec = declared.outputs[0];
  const output = graph.outputs.find((t) => t.name === spec?.name);
  if (!spec || !output) return undefined; // declaredMismatch named it
  const hidden = spec.dims.at(-1) ?? -1;
  const wrong = pooledMismatch(output, hidden);
  return wrong && `${file} output ${describeTensor(output)} ${wrong}`;
}

function sequenceMismatch(tensor: GraphTensor, type: string): string | undefined {
  if (tensor.type !== "int64") return `is not ${type}`;
  const dims = tensor.shape;
  if (!dims) return undefined;
  if (dims.length !== 2) return "is not [batch, sequence] (rank 2)";
  if ((dims[0] ?? -1) >= 0)
    return "has a fixed batch axis; the worker batches up to max_batch_size inputs";
  if ((dims[1] ?? -1) >= 0)
    return "has a fixed sequence axis; the worker pads each batch to its longest input (export it with a dynamic axis)";
  return undefined;
}

function pooledMismatch(tensor: GraphTensor, hidden: number): string | undefined {
  if (tensor.type !== "float32") return "is not float32, as the worker pools it";
  const dims = tensor.shape;
  if (!dims) return undefined;
  if (dims.length !== 3 && dims.length !== 2)
    return "is neither hidden states [batch, sequence, hidden] (rank 3) nor pooled [batch, hidden] (rank 2)";
  const width = dims.at(-1) ?? -1;
  if (width >= 0 && width !== hidden)
    return `has a hidden width of ${width}, but model.json's output says ${hidden}`;
  return undefined;
}
