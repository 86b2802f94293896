import type { InferenceSession } from "onnxruntime-node";

/** One input or output of an ONNX graph as its session reads it. */
export interface GraphTensor {
  name: string;
  /** ONNX Runtime's element type (`float32`, `int64`, ...); `non-tensor` for a sequence or map. */
  type: string;
  /**
   * Its axes, -1 for a variable one (a symbolic or unnamed dimension, as model.json writes it);
   * undefined when the graph states no shape, so that nothing is refused on a guess.
   */
  shape: number[] | undefined;
}

/** What an ONNX graph takes and gives: the part of it a model.json describes. */
export interface GraphSignature {
  inputs: GraphTensor[];
  outputs: GraphTensor[];
}

export function signatureOf(session: InferenceSession): GraphSignature {
  return {
    inputs: session.inputMetadata.map(tensorOf),
    outputs: session.outputMetadata.map(tensorOf),
  };
}

function tensorOf(meta: InferenceSession.ValueMetadata): GraphTensor {
  if (!meta.isTensor) return { name: meta.name, type: "non-tensor", shape: undefined };
  // ONNX Runtime reads an absent shape as [], which a classifier's tensor (batch axis first)
  // never is
  const shape =
    meta.shape.length === 0
      ? undefined
      : meta.shape.map((d) => (typeof d === "number" && d >= 0 ? d : -1));
  return { name: meta.name, type: meta.type, shape };
}

/** `'input' float32[-1,784]`: a tensor as mismatch messages show it. */
export function describeTensor(tensor: GraphTensor): string {
  const shape = tensor.shape ? `[${tensor.shape.join(",")}]` : "";
  return `'${tensor.name}' ${tensor.type}${shape}`;
}

/** A graph's inputs or outputs, listed in one line (a decoder's dozens of KV tensors cut short). */
export function listTensors(tensors: readonly GraphTensor[], most = 6): string {
  if (tensors.length === 0) return "none";
  const shown = tensors.slice(0, most).map(describeTensor).join(", ");
  return tensors.length > most ? `${shown} and ${tensors.length - most} more` : shown;
}
