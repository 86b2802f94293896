/** One sequence's part of a step: the tokens to append to its cache. */
export interface StepRow {
  /** Sequence id, unique per runtime; its KV cache lives in the thread. */
  seq: number;
  /** New tokens: the prompt on the first step, then one sampled token per step. */
  tokens: number[];
}

export interface LmShape {
  layers: number;
  heads: number;
  headDim: number;
  vocab: number;
}

export type LmRequest =
  | { type: "step"; id: number; rows: StepRow[] }
  | { type: "release"; seqs: number[] }
  | { type: "close" };

export type LmReply =
  | { type: "ready" }
  | { type: "load-error"; message: string }
  /** Last-position logits of every row, row-major [rows, vocab], in one transferable buffer. */
  | { type: "logits"; id: number; logits: Float32Array }
  | { type: "error"; id: number; message: string };
