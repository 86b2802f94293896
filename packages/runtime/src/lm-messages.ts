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

/** A sequence's KV cache on its own, handed between threads: per layer, key then value. */
export interface SeqCache {
  seq: number;
  /** Positions cached; each tensor is [heads, len, headDim]. */
  len: number;
  tensors: Float32Array[];
}

/** The buffers of caches to hand over: moved to the other thread, not copied. */
export function cacheBuffers(caches: SeqCache[]): ArrayBuffer[] {
  return caches.flatMap((c) => c.tensors.map((t) => t.buffer as ArrayBuffer));
}

export type LmRequest =
  | { type: "step"; id: number; rows: StepRow[] }
  /** A step over fresh prompts whose caches leave with the logits (for the decode thread). */
  | { type: "prefill"; id: number; rows: StepRow[] }
  /** Caches prefilled elsewhere; the sequences decode here from now on. */
  | { type: "adopt"; caches: SeqCache[] }
  | { type: "release"; seqs: number[] }
  | { type: "close" };

export type LmReply =
  | { type: "ready" }
  | { type: "load-error"; message: string }
  /** Last-position logits of every row, row-major [rows, vocab], in one transferable buffer. */
  | { type: "logits"; id: number; logits: Float32Array }
  | { type: "prefilled"; id: number; logits: Float32Array; caches: SeqCache[] }
  | { type: "error"; id: number; message: string };
