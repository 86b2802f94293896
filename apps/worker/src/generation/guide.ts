import type { Tokenizer } from "@ferry/model-repository";
import { keepOnly } from "./logits-processors.js";

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

/** A language recognised byte by byte (JSON, a regular expression), tried on copies. */
export interface ByteGrammar {
  copy(): ByteGrammar;
  /** Takes the next byte; false (the state then spoilt) when no text of the language goes on so. */
  feed(b: number): boolean;
  /** Whether the text so far is one of the language. */
  readonly complete: boolean;
  /** Whether any text of the language goes on from here. */
  readonly open: boolean;
}

/**
 * A guide by a grammar: before each draw only the tokens whose bytes the grammar takes from
 * where the text is can be drawn, and the end of text once the text is complete. Guides run
 * only on byte-level vocabularies, where every byte is a token of its own: a text the grammar
 * takes can always be finished, one byte at a time if need be.
 */
export class GrammarGuide implements Guide {
  private readonly vocabulary: SpelledToken[];

  constructor(
    private readonly grammar: ByteGrammar,
    private readonly tokenizer: Tokenizer,
    vocabSize: number,
  ) {
    this.vocabulary = spelledVocabulary(tokenizer, vocabSize);
  }

  advance(token: number): void {
    if (token === this.tokenizer.eosTokenId) return;
    for (const b of this.tokenizer.tokenText(token).bytes) this.grammar.feed(b);
  }

  mask(logits: Float32Array): void {
    const eos = this.tokenizer.eosTokenId;
    const allowed: number[] = this.grammar.complete && eos !== undefined ? [eos] : [];
    if (this.grammar.open) {
      // a token whose first byte is refused needs no copy of the grammar: most of them
      const firstTaken = new Map<number, boolean>();
      const takes = (b: number) => {
        let taken = firstTaken.get(b);
        if (taken === undefined) {
          taken = this.grammar.copy().feed(b);
          firstTaken.set(b, taken);
        }
        return taken;
      };
      for (const { id, bytes } of this.vocabulary) {
        if (!takes(bytes[0] ?? -1)) continue;
        const trial = bytes.length === 1 ? undefined : this.grammar.copy();
        if (!trial || bytes.every((b) => trial.feed(b))) allowed.push(id);
      }
    }
    keepOnly(logits, allowed);
  }
}
