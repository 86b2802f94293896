import type { TokenSet } from "./token-set.js";

/** Bytes of masks one vocabulary keeps: ~10,000 states' masks at 50,000 tokens. */
const BUDGET_BYTES = 64 * 1024 * 1024;

/**
 * The tokens a grammar allows from a state, kept per (language, state) and shared by every
 * sequence and request: inside a JSON string, or a schema's repeated parts, the same few
 * states come back at nearly every step (Outlines' index, built as it is needed). Least
 * recently used masks go first once the budget is spent.
 */
export class MaskCache {
  private readonly masks = new Map<string, TokenSet>();
  private readonly languages = new WeakMap<object, number>();
  private nextLanguage = 0;
  private bytes = 0;

  constructor(private readonly budgetBytes = BUDGET_BYTES) {}

  get(language: object, state: string): TokenSet | undefined {
    const key = this.keyOf(language, state);
    const mask = this.masks.get(key);
    if (mask) {
      // most recently used last
      this.masks.delete(key);
      this.masks.set(key, mask);
    }
    return mask;
  }

  set(language: object, state: string, mask: TokenSet): void {
    const key = this.keyOf(language, state);
    const old = this.masks.get(key);
    if (old) this.bytes -= footprint(key, old);
    this.masks.delete(key);
    this.masks.set(key, mask);
    this.bytes += footprint(key, mask);
    for (const [oldest, evicted] of this.masks) {
      if (this.bytes <= this.budgetBytes) break;
      this.masks.delete(oldest);
      this.bytes -= footprint(oldest, evicted);
    }
  }

  get size(): number {
    return this.masks.size;
  }

  private keyOf(language: object, state: string): string {
    let id = this.languages.get(language);
    if (id === undefined) {
      id = this.nextLanguage++;
      this.languages.set(language, id);
    }
    return `${id} ${state}`;
  }
}

/**
 * What an entry holds: its mask, and its key (a large pattern's state sets make long keys; at
 * a small vocabulary they outweigh the mask), with the map's own share.
 */
function footprint(key: string, mask: TokenSet): number {
  return mask.bytes + 2 * key.length + 64;
}
