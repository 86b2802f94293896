import { createHash } from "node:crypto";
import type { KeptPrompt, LmShape } from "./lm-messages.js";

/** Prompt tokens per block: prefixes are kept and found in whole blocks (vLLM's block size). */
export const PREFIX_BLOCK = 16;

/** Entries kept since the other thread last took them, at most. */
const MAX_FRESH = 64;

/**
 * One prompt's cache, kept: its first `len` tokens, and per layer key then value
 * [heads, stride, d] (`stride` ≥ `len`: a cache handed over whole keeps its last positions).
 */
interface Entry {
  tokens: Int32Array;
  len: number;
  stride: number;
  tensors: Float32Array[];
  /** Its blocks' chain keys, the k-th naming its first k blocks. */
  keys: string[];
  bytes: number;
}

/**
 * Automatic prefix caching (vLLM's): the KV cache of prompts already read, kept in whole
 * blocks, so that a prompt that begins as an earlier one did (a chat's system prompt and the
 * turns before the last, a few-shot preamble) reads only what follows. A block is named by
 * the chain of its tokens and every token before it, so a key names a whole prefix; a hit is
 * checked token for token. Least recently used prompts go first once the budget is spent.
 * The cache of a prefix depends on nothing after it (causal attention), so reading the rest
 * on top of it computes what reading the whole prompt does.
 */
export class PrefixCache {
  private readonly byKey = new Map<string, Entry>();
  /** Kept entries, least recently used first. */
  private readonly entries = new Set<Entry>();
  private bytes = 0;
  /** Chain keys already worked out, by token list (see `keysOf`). */
  private readonly keys = new WeakMap<readonly number[], string[]>();
  /** Entries kept here since the last `takeFresh` (not those the other thread handed over). */
  private fresh: Entry[] = [];

  constructor(
    private readonly shape: LmShape,
    private readonly budgetBytes: number,
  ) {}

  /**
   * The longest kept prefix of `tokens`, in whole blocks and leaving at least one token to
   * read (whose logits the step returns): its cache, copied for the sequence to own.
   */
  take(tokens: readonly number[]): { len: number; tensors: Float32Array[] } | undefined {
    const keys = this.keysOf(tokens, Math.floor((tokens.length - 1) / PREFIX_BLOCK));
    for (let k = keys.length; k >= 1; k--) {
      const entry = this.byKey.get(keys[k - 1] ?? "");
      const len = k * PREFIX_BLOCK;
      if (!entry || !startsWith(tokens, entry.tokens, len)) continue;
      this.entries.delete(entry);
      this.entries.add(entry);
      return { len, tensors: entry.tensors.map((t) => this.positions(t, entry.stride, len)) };
    }
    return undefined;
  }

  /** Whether the whole blocks of `tokens`' first `len` are kept already. */
  knows(tokens: readonly number[], len: number): boolean {
    const blocks = Math.floor(Math.min(tokens.length, len) / PREFIX_BLOCK);
    if (blocks === 0) return true;
    const known = this.byKey.get(this.keysOf(tokens, blocks)[blocks - 1] ?? "");
    return known !== undefined && startsWith(tokens, known.tokens, blocks * PREFIX_BLOCK);
  }

  /**
   * Keeps the whole blocks of a prompt read: `tensors` ([heads, len, d]) hold at least its
   * tokens. `owned`: nothing else will use them (they are kept as they are, not copied);
   * `fromPeer`: the other thread kept them first (they are not handed back by `takeFresh`).
   * Returns whether it was new.
   */
  keep(
    tokens: readonly number[],
    tensors: Float32Array[],
    len: number,
    { owned = false, fromPeer = false }: { owned?: boolean; fromPeer?: boolean } = {},
  ): boolean {
    const blocks = Math.floor(Math.min(tokens.length, len) / PREFIX_BLOCK);
    if (blocks === 0) return false;
    const kept = blocks * PREFIX_BLOCK;
    const keys = this.keysOf(tokens, blocks);
    const known = this.byKey.get(keys[blocks - 1] ?? "");
    if (known && startsWith(tokens, known.tokens, kept)) {
      this.entries.delete(known);
      this.entries.add(known);
      return false;
    }
    const { kvHeads: heads, headDim } = this.shape;
    const stride = owned ? len : kept;
    const entry: Entry = {
      tokens: Int32Array.from(tokens.slice(0, kept)),
      len: kept,
      stride,
      tensors: owned ? tensors : tensors.map((t) => this.positions(t, len, kept)),
      keys,
      bytes: tensors.length * heads * stride * headDim * 4 + kept * 4,
    };
    if (entry.bytes > this.budgetBytes) return false;
    // a prompt's blocks name it from now on; an entry none of whose blocks names it any more
    // (a shorter prompt this one goes on from) can no longer be found, and goes
    const superseded = new Set<Entry>();
    for (const key of keys) {
      const before = this.byKey.get(key);
      if (before) superseded.add(before);
      this.byKey.set(key, entry);
    }
    for (const old of superseded)
      if (!old.keys.some((k) => this.byKey.get(k) === old)) this.drop(old);
    this.entries.add(entry);
    this.bytes += entry.bytes;
    for (const oldest of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.drop(oldest);
    }
    // a bound: the other thread may not ask for a while
    if (!fromPeer && this.fresh.push(entry) > MAX_FRESH) this.fresh.shift();
    return true;
  }

  /** Copies of the entries kept here since the last call and still kept, for the other thread. */
  takeFresh(): KeptPrompt[] {
    const fresh = this.fresh.filter((entry) => this.entries.has(entry));
    this.fresh = [];
    return fresh.map((entry) => ({
      tokens: [...entry.tokens],
      len: entry.len,
      tensors: entry.tensors.map((t) => this.positions(t, entry.stride, entry.len)),
    }));
  }

  /** Prompts kept, and their bytes. */
  get size(): { prompts: number; bytes: number } {
    return { prompts: this.entries.size, bytes: this.bytes };
  }

  /**
   * The chain keys of `tokens`' first `blocks` blocks, hashed once per token list: a prompt is
   * looked up before its step and kept after it.
   */
  private keysOf(tokens: readonly number[], blocks: number): string[] {
    const known = this.keys.get(tokens);
    if (known && known.length >= blocks) return known.slice(0, blocks);
    const keys = chainKeys(tokens, blocks);
    this.keys.set(tokens, keys);
    return keys;
  }

  private drop(entry: Entry): void {
    if (!this.entries.delete(entry)) return;
    this.bytes -= entry.bytes;
    for (const key of entry.keys) if (this.byKey.get(key) === entry) this.byKey.delete(key);
  }

  /** The first `keep` positions of a [heads, len, d] tensor, as a [heads, keep, d] one. */
  private positions(t: Float32Array, len: number, keep: number): Float32Array {
    const { kvHeads: heads, headDim: d } = this.shape;
    const out = new Float32Array(heads * keep * d);
    for (let h = 0; h < heads; h++)
      out.set(t.subarray(h * len * d, (h * len + keep) * d), h * keep * d);
    return out;
  }
}

/** The chain keys of the first `blocks` blocks of `tokens`: each hashes the one before and its block. */
function chainKeys(tokens: readonly number[], blocks: number): string[] {
  const keys: string[] = [];
  let key = "";
  for (let k = 0; k < blocks; k++) {
    const block = tokens.slice(k * PREFIX_BLOCK, (k + 1) * PREFIX_BLOCK).join(",");
    key = createHash("sha256").update(`${key}|${block}`).digest("base64");
    keys.push(key);
  }
  return keys;
}

function startsWith(tokens: readonly number[], prefix: Int32Array, len: number): boolean {
  if (prefix.length < len || tokens.length < len) return false;
  for (let i = 0; i < len; i++) if (tokens[i] !== prefix[i]) return false;
  return true;
}
