import type { GuidedSpec } from "./guided-spec.js";

/** A vocabulary as XGrammar reads it: GPT-2's byte-level spelling of every token's bytes. */
export interface VocabularyData {
  id: number;
  /** Each token's bytes in GPT-2's byte-to-character spelling; "" for one that spells nothing. */
  pieces: string[];
  /** The model's logits per position (may exceed the tokenizer's own count). */
  size: number;
  stopIds: number[];
}

/** What the engine asks the grammar thread; every request carries an id its reply repeats. */
export type GrammarRequest =
  | { type: "vocabulary"; id: number; vocabulary: VocabularyData }
  | {
      type: "open";
      id: number;
      seq: number;
      vocabulary: number;
      key: string;
      spec: GuidedSpec;
      /** Tokens already drawn (a resumed or rebuilt sequence). */
      tokens: number[];
    }
  | { type: "advance"; id: number; seq: number; tokens: number[] }
  | { type: "close"; id: number; seq: number };

export type GrammarReply =
  | { type: "ready" }
  | { type: "done"; id: number }
  /** The next token's bitmask (bit set: allowed), as a transferred buffer. */
  | { type: "mask"; id: number; words: ArrayBuffer; memoryBytes: number }
  /**
   * A request that failed: `invalid` when its spec is at fault; `broken` when XGrammar's
   * WebAssembly failed under it (a stack run into its heap), after which the thread is unsound.
   */
  | { type: "error"; id: number; message: string; invalid: boolean; broken?: boolean };
