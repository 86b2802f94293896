/** A dense tensor as it crosses thread boundaries: a typed array and its shape. */
export interface TensorData {
  data: Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array;
  dims: number[];
}

export type TensorMap = Record<string, TensorData>;

/** ONNX Runtime's name for the element type a typed array holds. */
export function ortType(
  data: TensorData["data"],
): "float32" | "float64" | "int32" | "int64" | "bool" {
  if (data instanceof Float32Array) return "float32";
  if (data instanceof Float64Array) return "float64";
  if (data instanceof Int32Array) return "int32";
  if (data instanceof BigInt64Array) return "int64";
  return "bool";
}

export type ExecutionProvider = "cpu" | "cuda";

export interface SessionOptions {
  /** ONNX Runtime execution provider. @defaultValue "cpu" */
  executionProvider: ExecutionProvider;
  /** Threads one session uses inside an operator. @defaultValue 1 */
  intraOpThreads: number;
}
