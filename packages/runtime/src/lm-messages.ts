import type { GraphSignature } from "./graph-signature.js";

/** One sequence's part of a step: the tokens to append to its cache. */
export interface StepRow {
  /** Sequence id, unique per runtime; its KV cache lives in the thread. */
  seq: number;
  /** New tokens: the prompt on the first step, then one sampled token per step. */
  tokens: number[];
  /**
   * A prefill row's first `length` tokens (its prompt) scored as the model reads them: each
   * after the first under the positions before it, with the `top` likeliest ids there.
   */
  scorePrompt?: { length: number; top: number };
}

/** A prompt's tokens as the model scores them (a row's `scorePrompt`). */
export interface PromptScores {
  seq: number;
  /** [j]: the log probability of token j + 1 under positions 0..j. */
  logprobs: Float32Array;
  /** [j]: token j + 1's rank there, 1 for the likeliest (vLLM's `rank`). */
  ranks: Int32Array;
  /** [j * top + r]: the r-th likeliest id at position j; `topLogprobs` its log probability. */
  topIds: Int32Array;
  topLogprobs: Float32Array;
  top: number;
}

/**
 * What the LM thread holds of a decoder: its KV cache (per layer a key and a value, each
 * [batch, kvHeads, positions, headDim]) and the logits' width.
 */
export interface LmShape {
  layers: number;
  /** The cache's heads: fewer than the query heads under grouped-query attention. */
  kvHeads: number;
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

/** A prompt a prefix cache kept, as handed to another thread: its tokens and cache ([heads, len, d] each). */
export interface KeptPrompt {
  tokens: number[];
  len: number;
  tensors: Float32Array[];
}

/** The buffers of caches to hand over: moved to the other thread, not copied. */
export function cacheBuffers(caches: ReadonlyArray<{ tensors: Float32Array[] }>): ArrayBuffer[] {
  return caches.flatMap((c) => c.tensors.map((t) => t.buffer as ArrayBuffer));
}

export type LmRequest =
  | { type: "step"; id: number; rows: StepRow[] }
  /** A step over fresh prompts whose caches leave with the logits (for the decode thread). */
  | { type: "prefill"; id: number; rows: StepRow[] }
  /** Caches prefilled elsewhere; the sequences decode here from now on. */
  | { type: "adopt"; caches: SeqCache[] }
  /** Prompts the other LM thread kept in its prefix cache: this one keeps them too. */
  | { type: "keep"; prompts: KeptPrompt[] }
  /**
   * A finished sequence's cache goes into the prefix cache (prompt and completion, as far as
   * its cache reaches), before its release: a conversation's next turn begins with them.
   */
  | { type: "retain"; id: number; seq: number; tokens: number[] }
  | { type: "release"; seqs: number[] }
  | { type: "close" };

export type LmReply =
  | { type: "ready"; graph: GraphSignature }
  | { type: "load-error"; message: string }
  /**
   * Last-position logits of every row, row-major [rows, vocab], in one transferable buffer;
   * the prompt scores of rows that asked for them.
   */
  | {
      type: "logits";
      id: number;
      logits: Float32Array;
      prompts: PromptScores[];
      cached: number[];
      /** Prompts this step added to the prefix cache, for the other thread (when there is one). */
      kept: KeptPrompt[];
    }
  | {
      type: "prefilled";
      id: number;
      logits: Float32Array;
      prompts: PromptScores[];
      /** Per row: its first tokens' cache taken from the prefix cache, not computed (0: none). */
      cached: number[];
      kept: KeptPrompt[];
      caches: SeqCache[];
    }
  /** What a `retain` added to the prefix cache, for the other thread (when there is one). */
  | { type: "retained"; id: number; kept: KeptPrompt[] }
  | { type: "error"; id: number; message: string };
