import type { LmShape } from "./lm-messages.js";

/**
 * Left-padded past for a batch: per layer, key then value, each [b, heads, P, headDim]; row i
 * holds its `lens[i]` positions at the right end (columns P - len .. P - 1).
 */
export interface Past {
  P: number;
  lens: number[];
  tensors: Float32Array[];
}

/** A sequence's cache on its own: per layer, key then value, each [heads, len, headDim]. */
interface Own {
  len: number;
  tensors: Float32Array[];
}

/**
 * Every sequence's KV cache, kept so that steady decoding copies nothing: the last decode
 * step's `present` outputs (already left-padded, batch-major) are fed back as the next step's
 * past while the same sequences decode in the same order. Only when membership changes (a
 * sequence joins or leaves) is a new batch gathered, once, from the old batch and from the
 * caches of sequences that have just been prefilled.
 */
export class KvStore {
  private batch: (Past & { seqs: number[] }) | undefined;
  /** Batch rows that no longer count: released, or cut out into a cache of their own. */
  private readonly gone = new Set<number>();
  private readonly own = new Map<number, Own>();

  constructor(private readonly shape: LmShape) {}

  /** Positions cached for a sequence (0 when it has none). */
  length(seq: number): number {
    const own = this.own.get(seq);
    if (own) return own.len;
    const at = this.batchRow(seq);
    return at >= 0 ? (this.batch?.lens[at] ?? 0) : 0;
  }

  /** The past for a step over `seqs`, in that order: the previous batch itself when it can be. */
  past(seqs: number[]): Past {
    const batch = this.batch;
    if (batch && this.gone.size === 0 && sameOrder(batch.seqs, seqs)) return batch;
    const lens = seqs.map((s) => this.length(s));
    const P = Math.max(0, ...lens);
    const { layers, heads, headDim: d } = this.shape;
    const tensors: Float32Array[] = [];
    for (let t = 0; t < layers * 2; t++) {
      const dst = new Float32Array(seqs.length * heads * P * d);
      seqs.forEach((seq, i) => {
        this.copyRow(seq, t, lens[i] ?? 0, dst, (h, len) => ((i * heads + h) * P + (P - len)) * d);
      });
      tensors.push(dst);
    }
    return { P, lens, tensors };
  }

  /**
   * Takes a step's `present` outputs ([b, heads, P + S, d]; row i's new tokens are its last
   * `added[i]` columns). A decode step's outputs become the batch as they are; after a prefill
   * each sequence's cache is cut out on its own, leaving the decoding batch untouched.
   */
  absorb(seqs: number[], past: Past, S: number, added: number[], present: Float32Array[]): void {
    if (S === 1 && past.lens.every((len) => len > 0)) {
      // rows of the old batch that did not take part keep their caches on their own
      for (const seq of this.batch?.seqs ?? [])
        if (!this.gone.has(seq) && !seqs.includes(seq)) this.detach(seq);
      for (const seq of seqs) this.own.delete(seq);
      this.gone.clear();
      this.batch = {
        seqs: [...seqs],
        P: past.P + 1,
        lens: past.lens.map((l) => l + 1),
        tensors: present,
      };
      return;
    }
    const { heads, headDim: d } = this.shape;
    const T = past.P + S;
    seqs.forEach((seq, i) => {
      const len = past.lens[i] ?? 0;
      const s = added[i] ?? 0;
      const tensors = present.map((out) => {
        const dst = new Float32Array(heads * (len + s) * d);
        for (let h = 0; h < heads; h++) {
          const base = (i * heads + h) * T * d;
          dst.set(out.subarray(base + (past.P - len) * d, base + past.P * d), h * (len + s) * d);
          dst.set(out.subarray(base + (T - s) * d, base + T * d), (h * (len + s) + len) * d);
        }
        return dst;
      });
      this.own.set(seq, { len: len + s, tensors });
      if (this.batchRow(seq) >= 0) this.gone.add(seq);
    });
  }

  /** Forgets a sequence. A batch row is not copied away now: the next step gathers without it. */
  release(seq: number): void {
    this.own.delete(seq);
    if (this.batchRow(seq) < 0) return;
    this.gone.add(seq);
    if (this.batch?.seqs.every((s) => this.gone.has(s))) {
      this.batch = undefined;
      this.gone.clear();
    }
  }

  private batchRow(seq: number): number {
    if (!this.batch || this.gone.has(seq)) return -1;
    return this.batch.seqs.indexOf(seq);
  }

  /** Where a sequence's tensor `t` lives, with the offset of head h's last `len` positions. */
  private source(seq: number, t: number) {
    const { heads, headDim: d } = this.shape;
    const own = this.own.get(seq);
    if (own) {
      const data = own.tensors[t];
      return data && { data, offset: (h: number, _len: number) => h * own.len * d };
    }
    const at = this.batchRow(seq);
    const batch = this.batch;
    const data = batch?.tensors[t];
    if (!batch || !data || at < 0) return undefined;
    const P = batch.P;
    return { data, offset: (h: number, len: number) => ((at * heads + h) * P + (P - len)) * d };
  }

  /** Copies a batch row out into a cache of its own. */
  private detach(seq: number): void {
    const len = this.length(seq);
    const { layers, heads, headDim: d } = this.shape;
    const tensors: Float32Array[] = [];
    for (let t = 0; t < layers * 2; t++) {
      const dst = new Float32Array(heads * len * d);
      this.copyRow(seq, t, len, dst, (h) => h * len * d);
      tensors.push(dst);
    }
    this.own.set(seq, { len, tensors });
  }

  /** Copies a sequence's last `len` positions of tensor `t`, head by head, to `at(h, len)`. */
  private copyRow(
    seq: number,
    t: number,
    len: number,
    dst: Float32Array,
    at: (h: number, len: number) => number,
  ): void {
    const from = len > 0 ? this.source(seq, t) : undefined;
    if (!from) return;
    const { heads, headDim: d } = this.shape;
    for (let h = 0; h < heads; h++) {
      const src = from.offset(h, len);
      dst.set(from.data.subarray(src, src + len * d), at(h, len));
    }
  }
}

function sameOrder(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
