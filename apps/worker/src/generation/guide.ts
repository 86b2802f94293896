import type { Tokenizer } from "@ferry/model-repository";

/**
 * Guided decoding (vLLM's `guided_choice`, JSON mode): what may be drawn next, given what was
 * drawn. The sequence feeds it every token it takes; the engine asks it to mask the logits
 * before each draw.
 */
export interface Guide {
  advance(token: number): void;
  /** Every logit but those of the tokens allowed next to minus infinity. */
  mask(logits: Float32Array): void;
}

/** A token that spells text: its id and its exact bytes. */
export interface SpelledToken {
  id: number;
  bytes: readonly number[];
}

const vocabularies = new WeakMap<Tokenizer, SpelledToken[]>();

/**
 * Every token that spells text (not the end of text, nor one without bytes), read once per
 * tokenizer: guides try the vocabulary's bytes against what may come next.
 */
export function spelledVocabulary(tokenizer: Tokenizer, vocabSize: number): SpelledToken[] {
  let tokens = vocabularies.get(tokenizer);
  if (tokens) return tokens;
  tokens = [];
  for (let id = 0; id < vocabSize; id++) {
    if (id === tokenizer.eosTokenId) continue;
    const { bytes } = tokenizer.tokenText(id);
    if (bytes.length > 0) tokens.push({ id, bytes });
  }
  vocabularies.set(tokenizer, tokens);
  return tokens;
}
