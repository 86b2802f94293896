import type { Tokenizer } from "@ferry/model-repository";
import { type Guide, type SpelledToken, spelledVocabulary } from "./guide.js";
import { JsonObjectGrammar } from "./json-grammar.js";
import { keepOnly } from "./logits-processors.js";

/**
 * JSON mode (OpenAI's `response_format: {"type": "json_object"}`, vLLM's `json_object`): the
 * completion is one JSON object. Before each draw only the tokens whose bytes the grammar
 * takes from where the text is can be drawn, and once the object is closed only the end of
 * text.
 */
export class JsonObjectGuide implements Guide {
  private readonly grammar = new JsonObjectGrammar();
  private readonly vocabulary: SpelledToken[];

  constructor(
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
    if (this.grammar.done) {
      keepOnly(logits, eos === undefined ? [] : [eos]);
      return;
    }
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
    const allowed: number[] = [];
    for (const { id, bytes } of this.vocabulary) {
      if (!takes(bytes[0] ?? -1)) continue;
      const trial = bytes.length === 1 ? undefined : this.grammar.copy();
      if (!trial || bytes.every((b) => trial.feed(b))) allowed.push(id);
    }
    keepOnly(logits, allowed);
  }
}
