import type { GraphSignature } from "./graph-signature.js";
import type { TensorMap } from "./tensor.js";

export type ThreadRequest = { type: "run"; id: number; feeds: TensorMap } | { type: "close" };

export type ThreadReply =
  | { type: "ready"; graph: GraphSignature }
  | { type: "load-error"; message: string }
  | { type: "result"; id: number; outputs: TensorMap }
  | { type: "error"; id: number; message: string };
