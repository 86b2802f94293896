import type { Tokenizer } from "@ferry/model-repository";
import { MaskCache } from "./mask-cache.js";
import { TokenSet } from "./token-set.js";
import { VocabularyTrie } from "./vocabulary-trie.js";

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
interface SpelledToken {
  id: number;
  bytes: readonly number[];
}

/**
 * Every token that spells text (not the end of text, nor one without bytes): guides try the
 * vocabulary's bytes against what may come next.
 */
function spelledVocabulary(tokenizer: Tokenizer, vocabSize: number): SpelledToken[] {
  const tokens: SpelledToken[] = [];
  for (let id = 0; id < vocabSize; id++) {
    if (id === tokenizer.eosTokenId) continue;
    const { bytes } = tokenizer.tokenText(id);
    if (bytes.length > 0) tokens.push({ id, bytes });
  }
  return tokens;
}

/** What guides over one vocabulary share: its trie, and the masks found so far. */
interface VocabularyIndex {
  size: number;
  trie: VocabularyTrie;
  masks: MaskCache;
}

const indexes = new WeakMap<Tokenizer, VocabularyIndex[]>();

/** A tokenizer's vocabulary of `size` indexed, once per worker. */
function indexOf(tokenizer: Tokenizer, size: number): VocabularyIndex {
  let known = indexes.get(tokenizer);
  if (!known) {
    known = [];
    indexes.set(tokenizer, known);
  }
  let index = known.find((i) => i.size === size);
  if (!index) {
    index = {
      size,
      trie: new VocabularyTrie(spelledVocabulary(tokenizer, size)),
      masks: new MaskCache(),
    };
    known.push(index);
  }
  return index;
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
  /** What it recognises: one object per language (per pattern, say). */
  readonly language: object;
  /**
   * Its state as text: two grammars of one language with equal keys take the same texts from
   * here on, so one mask serves both.
   */
  readonly stateKey: string;
}

/**
 * A guide by a grammar: before each draw only the tokens whose bytes the grammar takes from
 * where the text is can be drawn, and the end of text once the text is complete. Guides run
 * only on byte-level vocabularies, where every byte is a token of its own: a text the grammar
 * takes can always be finished, one byte at a time if need be. A state's mask is found by
 * walking the vocabulary's trie once, then kept for every sequence that comes back to it.
 */
export class GrammarGuide implements Guide {
  private readonly index: VocabularyIndex;

  constructor(
    private readonly grammar: ByteGrammar,
    private readonly tokenizer: Tokenizer,
    vocabSize: number,
  ) {
    this.index = indexOf(tokenizer, vocabSize);
  }

  advance(token: number): void {
    if (token === this.tokenizer.eosTokenId) return;
    for (const b of this.tokenizer.tokenText(token).bytes) this.grammar.feed(b);
  }

  mask(logits: Float32Array): void {
    this.allowedNext().keepIn(logits);
  }

  /** The tokens that may be drawn next. */
  private allowedNext(): TokenSet {
    const { language, stateKey } = this.grammar;
    let allowed = this.index.masks.get(language, stateKey);
    if (!allowed) {
      allowed = new TokenSet(this.index.size);
      if (this.grammar.open) this.index.trie.collect(this.grammar, allowed);
      const eos = this.tokenizer.eosTokenId;
      if (this.grammar.complete && eos !== undefined) allowed.add(eos);
      this.index.masks.set(language, stateKey, allowed);
    }
    return allowed;
  }
}
