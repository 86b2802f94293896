import type { LmShape, SeqCache } from "./lm-messages.js";

/**
 * How a step's rows sit in the past tensors (per layer, key then value, each
 * [rows, heads, width, headDim], left-padded: a row's `lens[i]` positions are its last columns).
 * A row is a requested sequence or a hole: a seat freed by a sequence that left, kept so
 * that the batch need not be copied until another sequence takes it.
 */
export interface Layout {
  /** Width of the batch: past positions every row is padded to. */
  width: number;
  /** Per row: the index of its sequence in the step's request, or -1 for a hole. */
  requestIndex: number[];
  /** Per row: positions cached (0 for a hole). */
  lens: number[];
  tensors: Float32Array[];
  /** True when every row adds one token to a cached sequence: the outputs become the batch. */
  decode: boolean;
}

/** A sequence's cache on its own: per layer, key then value, each [heads, len, headDim]. */
type DetachedCache = Omit<SeqCache, "seq">;

interface Batch {
  /** Per row: the sequence it holds, or undefined for a hole. */
  seqs: (number | undefined)[];
  /** Width of the batch: past positions every row is padded to. */
  width: number;
  lens: number[];
  tensors: Float32Array[];
  /** Decode steps in a row that ran with holes and nobody to fill them. */
  idleSteps: number;
}

/** Steps a hole may stay empty before the batch is compacted without it. */
const HOLE_PATIENCE = 8;

/**
 * Every sequence's KV cache, kept so that decoding copies as little as it can: the last
 * decode step's `present` outputs (already left-padded, batch-major) are fed back as the next
 * step's past. A sequence that leaves leaves a hole in its row; one that joins (its prompt
 * prefilled in a pass of its own) is copied into a hole, one row, instead of the whole batch
 * being gathered anew. The batch is gathered (compacted) only when it must grow, when a
 * joiner is longer than its width, when holes stay empty, or when the left padding that the
 * longest departed sequences leave behind grows past a quarter of the width.
 */
export class KvStore {
  private batch: Batch | undefined;
  private readonly detached = new Map<number, DetachedCache>();
  /** Whole-batch copies and single-row fills so far: what the layout policy costs. */
  readonly copies = { gathers: 0, fills: 0 };

  constructor(private readonly shape: LmShape) {}

  /** Positions cached for a sequence (0 when it has none). */
  length(seq: number): number {
    const own = this.detached.get(seq);
    if (own) return own.len;
    const at = this.batchRow(seq);
    return at >= 0 ? (this.batch?.lens[at] ?? 0) : 0;
  }

  /** Rows of the current batch (holes included); 0 when there is none. For tests and metrics. */
  get dims(): { rows: number; width: number } {
    return { rows: this.batch?.seqs.length ?? 0, width: this.batch?.width ?? 0 };
  }

  /** Where each of `seqs` (adding `added[i]` tokens) sits in this step's past. */
  layout(seqs: number[], added: number[]): Layout {
    const lens = seqs.map((s) => this.length(s));
    const decode = added.every((n) => n === 1) && lens.every((l) => l > 0);
    if (decode) {
      const seated = this.seat(seqs, lens);
      if (seated) return seated;
    }
    const dense = this.gather(seqs, lens);
    return { ...dense, requestIndex: seqs.map((_, i) => i), decode };
  }

  /**
   * Takes a step's `present` outputs ([rows, heads, width + chunk, d]; row i's new tokens are its
   * last `added` columns). A decode step's outputs become the batch as they are; after a
   * prefill each sequence's cache is cut out on its own, leaving the decoding batch untouched.
   */
  absorb(seqs: number[], layout: Layout, chunk: number, added: number[], present: Float32Array[]) {
    if (layout.decode) {
      for (const seq of seqs) this.detached.delete(seq);
      this.batch = {
        seqs: layout.requestIndex.map((k) => (k < 0 ? undefined : seqs[k])),
        width: layout.width + 1,
        lens: layout.lens.map((l, i) => ((layout.requestIndex[i] ?? -1) < 0 ? 0 : l + 1)),
        tensors: present,
        idleSteps: this.batch?.idleSteps ?? 0,
      };
      return;
    }
    const { kvHeads: heads, headDim: d } = this.shape;
    const T = layout.width + chunk;
    layout.requestIndex.forEach((k, i) => {
      const seq = seqs[k] ?? -1;
      const len = layout.lens[i] ?? 0;
      const s = added[k] ?? 0;
      const tensors = present.map((out) => {
        const dst = new Float32Array(heads * (len + s) * d);
        for (let h = 0; h < heads; h++) {
          const base = (i * heads + h) * T * d;
          dst.set(
            out.subarray(base + (layout.width - len) * d, base + layout.width * d),
            h * (len + s) * d,
          );
          dst.set(out.subarray(base + (T - s) * d, base + T * d), (h * (len + s) + len) * d);
        }
        return dst;
      });
      this.detached.set(seq, { len: len + s, tensors });
      this.vacate(seq);
    });
  }

  /**
   * A sequence's cache, to read: its own tensors when it is on its own (as every row is after a
   * prefill step), else a copy of its batch row (`copied`: the caller's to keep). Undefined
   * when it has none.
   */
  cacheOf(seq: number): { len: number; tensors: Float32Array[]; copied: boolean } | undefined {
    const own = this.detached.get(seq);
    if (own) return { ...own, copied: false };
    const row = this.batchRow(seq);
    const len = row >= 0 ? (this.batch?.lens[row] ?? 0) : 0;
    return len === 0 ? undefined : { len, tensors: this.rowOut(seq, len), copied: true };
  }

  /** Hands a sequence's cache over (to another thread) and forgets it here. */
  export(seq: number): SeqCache {
    const len = this.length(seq);
    const row = this.batchRow(seq);
    if (!this.detached.has(seq) && row >= 0) this.detach(seq, row);
    const own = this.detached.get(seq) ?? { len, tensors: [] };
    this.release(seq);
    return { seq, len: own.len, tensors: own.tensors };
  }

  /** Takes over a cache built elsewhere; the sequence joins the batch at its next decode. */
  adopt({ seq, len, tensors }: SeqCache): void {
    this.vacate(seq);
    this.detached.set(seq, { len, tensors });
  }

  /** Forgets a sequence. Its batch row becomes a hole; nothing is copied now. */
  release(seq: number): void {
    this.detached.delete(seq);
    this.vacate(seq);
  }

  /**
   * A decode step's layout on the current batch, when the batch can take it: sequences keep
   * their rows, joiners fill holes. Undefined when the batch must be gathered anew.
   */
  private seat(seqs: number[], lens: number[]): Layout | undefined {
    const batch = this.batch;
    if (!batch) return undefined;
    const index = new Map(seqs.map((s, k) => [s, k]));
    // a live sequence that sits this step out keeps its cache on its own
    batch.seqs.forEach((s, i) => {
      if (s !== undefined && !index.has(s)) {
        this.detach(s, i);
        batch.seqs[i] = undefined;
        batch.lens[i] = 0;
      }
    });
    const joiners = seqs.filter((s) => this.batchRow(s) < 0);
    const holes = batch.seqs.flatMap((s, i) => (s === undefined ? [i] : []));
    if (joiners.length > holes.length) return undefined;
    if (joiners.some((s) => this.length(s) > batch.width)) return undefined;
    batch.idleSteps = joiners.length === 0 && holes.length > 0 ? batch.idleSteps + 1 : 0;
    if (batch.idleSteps > HOLE_PATIENCE) return undefined;
    const longest = Math.max(...lens);
    if (batch.width - longest > Math.max(8, batch.width / 4)) return undefined;
    for (const [j, seq] of joiners.entries()) this.fill(batch, holes[j] ?? -1, seq);
    return {
      width: batch.width,
      requestIndex: batch.seqs.map((s) => (s === undefined ? -1 : (index.get(s) ?? -1))),
      lens: [...batch.lens],
      tensors: batch.tensors,
      decode: true,
    };
  }

  /** A dense past for `seqs` in that order, copied from wherever each one's cache is. */
  private gather(
    seqs: number[],
    lens: number[],
  ): {
    /** Width of the batch: past positions every row is padded to. */ width: number;
    lens: number[];
    tensors: Float32Array[];
  } {
    const width = Math.max(0, ...lens);
    const { layers, kvHeads: heads, headDim: d } = this.shape;
    const tensors: Float32Array[] = [];
    if (width > 0) this.copies.gathers++;
    for (let t = 0; t < layers * 2; t++) {
      const dst = new Float32Array(seqs.length * heads * width * d);
      seqs.forEach((seq, i) => {
        this.copyRow(
          seq,
          t,
          lens[i] ?? 0,
          dst,
          (h, len) => ((i * heads + h) * width + (width - len)) * d,
        );
      });
      tensors.push(dst);
    }
    if (this.batch) this.batch.idleSteps = 0;
    return { width, lens, tensors };
  }

  /** Copies a sequence's own cache into hole `row`, zeroing the row's padding. */
  private fill(batch: Batch, row: number, seq: number): void {
    const own = this.detached.get(seq);
    if (!own || row < 0) return;
    const { kvHeads: heads, headDim: d } = this.shape;
    const { width } = batch;
    const len = own.len;
    batch.tensors.forEach((dst, t) => {
      // a hole's stale columns are whatever its last occupant or a dummy token left there;
      // masked, but a NaN there would still poison the row's attention, so they are cleared
      dst.fill(0, row * heads * width * d, (row * heads + heads) * width * d);
      const src = own.tensors[t];
      if (!src) return;
      for (let h = 0; h < heads; h++)
        dst.set(
          src.subarray(h * len * d, (h + 1) * len * d),
          ((row * heads + h) * width + width - len) * d,
        );
    });
    batch.seqs[row] = seq;
    batch.lens[row] = len;
    this.detached.delete(seq);
    this.copies.fills++;
  }

  private vacate(seq: number): void {
    const batch = this.batch;
    const at = this.batchRow(seq);
    if (!batch || at < 0) return;
    batch.seqs[at] = undefined;
    batch.lens[at] = 0;
    if (batch.seqs.every((s) => s === undefined)) this.batch = undefined;
  }

  private batchRow(seq: number): number {
    return this.batch ? this.batch.seqs.indexOf(seq) : -1;
  }

  /** Where a sequence's tensor `t` lives, with the offset of head h's last `len` positions. */
  private source(seq: number, t: number) {
    const { kvHeads: heads, headDim: d } = this.shape;
    const own = this.detached.get(seq);
    if (own) {
      const data = own.tensors[t];
      return data && { data, offset: (h: number, _len: number) => h * own.len * d };
    }
    const at = this.batchRow(seq);
    const batch = this.batch;
    const data = batch?.tensors[t];
    if (!batch || !data || at < 0) return undefined;
    const width = batch.width;
    return {
      data,
      offset: (h: number, len: number) => ((at * heads + h) * width + (width - len)) * d,
    };
  }

  /** Copies batch row `row` (sequence `seq`) out into a cache of its own. */
  private detach(seq: number, row: number): void {
    const len = this.batch?.lens[row] ?? 0;
    this.detached.set(seq, { len, tensors: this.rowOut(seq, len) });
  }

  /** A sequence's last `len` positions, every tensor copied out as [heads, len, d]. */
  private rowOut(seq: number, len: number): Float32Array[] {
    const { layers, kvHeads: heads, headDim: d } = this.shape;
    return Array.from({ length: layers * 2 }, (_, t) => {
      const dst = new Float32Array(heads * len * d);
      this.copyRow(seq, t, len, dst, (h) => h * len * d);
      return dst;
    });
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
    const { kvHeads: heads, headDim: d } = this.shape;
    for (let h = 0; h < heads; h++) {
      const src = from.offset(h, len);
      dst.set(from.data.subarray(src, src + len * d), at(h, len));
    }
  }
}
