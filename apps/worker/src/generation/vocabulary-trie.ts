import type { TokenSet } from "./token-set.js";

/** What the walk needs of a grammar (guide.ts's `ByteGrammar`, which imports this module). */
interface Recogniser {
  copy(): Recogniser;
  feed(b: number): boolean;
}

/**
 * A vocabulary's tokens by their bytes, as a trie: the tokens a grammar takes are found by
 * walking it, so that a prefix many tokens share (" the", "\"na") is fed to the grammar once,
 * and a prefix it refuses drops every token below it untried.
 */
export class VocabularyTrie {
  /** Per node: its children's bytes, the children, and the tokens that end at it. */
  private readonly childBytes: number[][] = [[]];
  private readonly children: number[][] = [[]];
  private readonly tokensAt: number[][] = [[]];

  constructor(tokens: Iterable<{ id: number; bytes: readonly number[] }>) {
    for (const { id, bytes } of tokens) {
      let node = 0;
      for (const b of bytes) node = this.childOf(node, b);
      this.tokensAt[node]?.push(id);
    }
  }

  /** Adds to `into` every token whose bytes `grammar` takes from where it is (the grammar left as it was). */
  collect(grammar: Recogniser, into: TokenSet): void {
    const stack: Array<[node: number, state: Recogniser]> = [[0, grammar.copy()]];
    for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
      const [node, state] = top;
      const bytes = this.childBytes[node] ?? [];
      const kids = this.children[node] ?? [];
      for (let i = 0; i < bytes.length; i++) {
        // the last child may have the node's own state: nothing else needs it after
        const next = i === bytes.length - 1 ? state : state.copy();
        if (!next.feed(bytes[i] ?? -1)) continue;
        const kid = kids[i] ?? 0;
        for (const id of this.tokensAt[kid] ?? []) into.add(id);
        if ((this.childBytes[kid]?.length ?? 0) > 0) stack.push([kid, next]);
      }
    }
  }

  private childOf(node: number, b: number): number {
    const bytes = this.childBytes[node] ?? [];
    const at = bytes.indexOf(b);
    if (at >= 0) return this.children[node]?.[at] ?? 0;
    const kid = this.childBytes.length;
    this.childBytes.push([]);
    this.children.push([]);
    this.tokensAt.push([]);
    bytes.push(b);
    this.children[node]?.push(kid);
    return kid;
  }
}
