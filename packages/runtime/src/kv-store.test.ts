import { describe, expect, it } from "vitest";
import { KvStore, type Layout } from "./kv-store.js";

// A stand-in for the model's KV concat: `present` = past + one column per new token, the
// column's every value naming (tensor, head, token), so a row's cache spells its history.
// Holes get NaN in their new column, the worst a dummy token could leave behind.
const shape = { layers: 1, kvHeads: 2, headDim: 3, vocab: 4 };
const T = shape.layers * 2;
const mark = (t: number, h: number, token: number) => t * 10_000 + h * 1_000 + token;

function run(kv: KvStore, rows: Array<{ seq: number; tokens: number[] }>): Layout {
  const seqs = rows.map((r) => r.seq);
  const added = rows.map((r) => r.tokens.length);
  const layout = kv.layout(seqs, added);
  const { width: P, requestIndex: from } = layout;
  const S = Math.max(...added);
  const { kvHeads: heads, headDim: d } = shape;
  const b = from.length;
  const present = Array.from({ length: T }, (_, t) => {
    const past = layout.tensors[t] ?? new Float32Array();
    const out = new Float32Array(b * heads * (P + S) * d);
    for (let i = 0; i < b; i++)
      for (let h = 0; h < heads; h++) {
        const row = (i * heads + h) * (P + S) * d;
        out.set(past.subarray((i * heads + h) * P * d, (i * heads + h + 1) * P * d), row);
        const tokens = rows[from[i] ?? -1]?.tokens ?? [Number.NaN];
        tokens.forEach((tok, j) => {
          const col = P + S - tokens.length + j;
          out.fill(
            Number.isNaN(tok) ? Number.NaN : mark(t, h, tok),
            row + col * d,
            row + (col + 1) * d,
          );
        });
      }
    return out;
  });
  kv.absorb(seqs, layout, S, added, present);
  return layout;
}

/** Checks that every requested row's past holds exactly its history, with clean padding. */
function expectHistories(
  layout: Layout,
  rows: Array<{ seq: number }>,
  history: Map<number, number[]>,
) {
  const { width: P, requestIndex: from, lens } = layout;
  const { kvHeads: heads, headDim: d } = shape;
  from.forEach((k, i) => {
    if (k < 0) return;
    const want = history.get(rows[k]?.seq ?? -1) ?? [];
    expect(lens[i]).toBe(want.length);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < heads; h++) {
        const base = (i * heads + h) * P * d;
        const row = Array.from(layout.tensors[t]?.subarray(base, base + P * d) ?? []);
        const got = row.slice((P - want.length) * d).filter((_, x) => x % d === 0);
        expect(got).toEqual(want.map((tok) => mark(t, h, tok)));
        expect(row.slice(0, (P - want.length) * d).every(Number.isFinite)).toBe(true);
      }
  });
}

describe("KvStore", () => {
  it("seats joiners in the holes that leavers leave, and gathers only to grow, widen or compact", () => {
    const kv = new KvStore(shape);
    const history = new Map<number, number[]>();
    const step = (rows: Array<{ seq: number; tokens: number[] }>) => {
      const layout = run(kv, rows);
      if (layout.decode) expectHistories(layout, rows, history);
      for (const r of rows) history.set(r.seq, [...(history.get(r.seq) ?? []), ...r.tokens]);
    };
    const decode = (seqs: number[], token: number) =>
      step(seqs.map((seq) => ({ seq, tokens: [token] })));

    step([
      { seq: 1, tokens: [1, 2, 3, 4] },
      { seq: 2, tokens: [5, 6] },
    ]);
    for (const tok of [7, 8, 9]) decode([1, 2], tok);
    expect(kv.copies).toEqual({ gathers: 1, fills: 0 }); // the first decode builds the batch

    step([{ seq: 3, tokens: [10, 11, 12] }]);
    decode([1, 2, 3], 13); // no hole to take: the batch grows by a gather
    expect(kv.copies.gathers).toBe(2);

    kv.release(1);
    decode([2, 3], 14); // seq 1's row is a hole now; nothing is copied
    decode([3, 2], 14);
    step([{ seq: 4, tokens: [15] }]);
    decode([2, 3, 4], 16); // 4 takes 1's row
    decode([4, 3, 2], 17); // the request's order is not the batch's
    expect(kv.copies).toEqual({ gathers: 2, fills: 1 });
    expect(kv.dims.rows).toBe(3);

    kv.release(2);
    step([{ seq: 5, tokens: Array.from({ length: 20 }, (_, i) => 20 + i) }]);
    decode([3, 4, 5], 18); // longer than the batch is wide: gathered wider
    expect(kv.copies.gathers).toBe(3);
    expect(kv.dims).toEqual({ rows: 3, width: 21 });

    kv.release(3);
    for (let i = 0; i < 9; i++) decode([4, 5], 40 + i); // nobody takes the hole: compacted once
    expect(kv.copies.gathers).toBe(4);
    expect(kv.dims.rows).toBe(2);

    kv.release(5);
    for (let i = 0; i < 3; i++) decode([4], 60 + i); // the widest left: its padding is dropped
    expect(kv.copies.gathers).toBe(5);
    expect(kv.dims.width).toBe(history.get(4)?.length ?? 0);
  });
});
