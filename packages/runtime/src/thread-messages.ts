import type { GraphSignature } from "./graph-signature.js";
import type { TensorMap } from "./tensor.js";

export type ThreadRequest =
  | { type: "run"; id: number; feeds: TensorMap }
  | { type: "runMany"; id: number; batches: TensorMap[] }
  | { type: "close" };

/** One batch's outcome among several run in one message: its outputs, or why it failed. */
export type BatchOutcome = { outputs: TensorMap } | { error: string };

export type ThreadReply =
  | { type: "ready"; graph: GraphSignature }
  | { type: "load-error"; message: string }
  | { type: "result"; id: number; outputs: TensorMap }
  | { type: "results"; id: number; outcomes: BatchOutcome[] }
  | { type: "error"; id: number; message: string };
