import type { Tokenizer } from "@ferry/model-repository";
import { type Guide, spelledVocabulary } from "./guide.js";
import { keepOnly } from "./logits-processors.js";

/** A trie of the vocabulary's tokens by their bytes: which tokens spell a given byte string's start. */
interface TrieNode {
  next: Map<number, TrieNode>;
  /** Tokens whose bytes end here. */
  tokens: number[];
}

/** Tries by tokenizer (built once: a walk of the whole vocabulary). */
const tries = new WeakMap<Tokenizer, TrieNode>();

function trieOf(tokenizer: Tokenizer, vocabSize: number): TrieNode {
  let root = tries.get(tokenizer);
  if (root) return root;
  root = { next: new Map(), tokens: [] };
  for (const { id, bytes } of spelledVocabulary(tokenizer, vocabSize)) {
    let node = root;
    for (const b of bytes) {
      let child = node.next.get(b);
      if (!child) {
        child = { next: new Map(), tokens: [] };
        node.next.set(b, child);
      }
      node = child;
    }
    node.tokens.push(id);
  }
  tries.set(tokenizer, root);
  return root;
}

/**
 * vLLM's `guided_choice`: the completion is one of `choices`, exactly. Before each draw only
 * the tokens that spell the next bytes of a choice the text so far begins can be drawn (and
 * leave a rest that tokens can spell), and the end of text once the text is a whole choice.
 */
export class ChoiceGuide implements Guide {
  private readonly choices: Uint8Array[];
  /** Per choice, per byte offset: whether tokens can spell the rest of it from there. */
  private readonly completes: boolean[][];
  private readonly root: TrieNode;
  /** The completion's bytes so far. */
  private made: number[] = [];

  constructor(
    choices: readonly string[],
    private readonly tokenizer: Tokenizer,
    vocabSize: number,
  ) {
    this.choices = choices.map((c) => new TextEncoder().encode(c));
    this.root = trieOf(tokenizer, vocabSize);
    this.completes = this.choices.map((choice) => {
      const ok = Array.from({ length: choice.length + 1 }, (_, i) => i === choice.length);
      for (let i = choice.length - 1; i >= 0; i--)
        ok[i] = this.spans(choice, i).some((end) => ok[end]);
      return ok;
    });
  }

  /** Where the tokens that spell `choice` from byte `from` on end, nearest first. */
  private spans(choice: Uint8Array, from: number): number[] {
    const ends: number[] = [];
    let node: TrieNode | undefined = this.root;
    for (let i = from; i < choice.length; i++) {
      node = node.next.get(choice[i] ?? -1);
      if (!node) break;
      if (node.tokens.length > 0) ends.push(i + 1);
    }
    return ends;
  }

  /** Takes a drawn token. */
  advance(token: number): void {
    if (token !== this.tokenizer.eosTokenId)
      this.made.push(...this.tokenizer.tokenText(token).bytes);
  }

  /** Every logit but those of tokens that lead toward a choice to minus infinity. */
  mask(logits: Float32Array): void {
    const allowed = new Set<number>();
    const at = this.made.length;
    this.choices.forEach((choice, c) => {
      if (!this.begins(choice)) return;
      if (choice.length === at && this.tokenizer.eosTokenId !== undefined)
        allowed.add(this.tokenizer.eosTokenId);
      // the tokens that spell the choice's next bytes and leave a rest tokens can spell
      let node: TrieNode | undefined = this.root;
      for (let i = at; i < choice.length && node; i++) {
        node = node.next.get(choice[i] ?? -1);
        if (this.completes[c]?.[i + 1]) for (const id of node?.tokens ?? []) allowed.add(id);
      }
    });
    keepOnly(logits, allowed);
  }

  private begins(choice: Uint8Array): boolean {
    if (choice.length < this.made.length) return false;
    for (let i = 0; i < this.made.length; i++) if (choice[i] !== this.made[i]) return false;
    return true;
  }
}
