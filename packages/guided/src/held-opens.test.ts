import { describe, expect, it } from "vitest";
import type { GrammarGuide } from "./grammar-guide.js";
import { HeldOpens } from "./held-opens.js";

const guide = (seq: number, owner: string) => ({ seq, owner }) as GrammarGuide;

describe("HeldOpens", () => {
  it("gives owners turns, each its own opens oldest first", () => {
    const held = new HeldOpens();
    // one key's four costly grammars arrive first, another's and a third's after them
    for (const [seq, owner] of [
      [1, "flood"],
      [2, "flood"],
      [3, "flood"],
      [4, "flood"],
      [5, "k2"],
      [6, "k3"],
      [7, "k2"],
    ] as const)
      held.hold(guide(seq, owner), () => undefined);
    const order: number[] = [];
    for (let next = held.next(); next; next = held.next()) order.push(next.guide.seq);
    expect(order).toEqual([1, 5, 6, 2, 7, 3, 4]);
  });

  it("an owner who comes back after its line emptied waits behind those still waiting", () => {
    const held = new HeldOpens();
    held.hold(guide(1, "a"), () => undefined);
    held.hold(guide(2, "b"), () => undefined);
    expect(held.next()?.guide.seq).toBe(1);
    held.hold(guide(3, "a"), () => undefined);
    held.hold(guide(4, "b"), () => undefined);
    expect([held.next()?.guide.seq, held.next()?.guide.seq, held.next()?.guide.seq]).toEqual([
      2, 3, 4,
    ]);
    expect(held.next()).toBeUndefined();
  });

  it("one who had a turn lately waits behind one who had none, though it held its opens first", () => {
    const held = new HeldOpens();
    held.hold(guide(1, "flood"), () => undefined);
    expect(held.next()?.guide.seq).toBe(1);
    // while 1 compiles: the flood's next two, then another key's
    held.hold(guide(2, "flood"), () => undefined);
    held.hold(guide(3, "flood"), () => undefined);
    held.hold(guide(4, "k2"), () => undefined);
    expect([held.next()?.guide.seq, held.next()?.guide.seq, held.next()?.guide.seq]).toEqual([
      4, 2, 3,
    ]);
  });

  it("holds a guide once however many wait for it, and drops every waiter", () => {
    const held = new HeldOpens();
    const settled: number[] = [];
    held.hold(guide(1, "a"), () => settled.push(1));
    held.hold(guide(1, "a"), () => settled.push(2));
    held.hold(guide(2, "b"), () => settled.push(3));
    expect(held.holds(1)).toBe(true);
    for (const waiter of held.drop()) waiter();
    expect(settled.sort()).toEqual([1, 2, 3]);
    expect(held.holds(1)).toBe(false);
    expect(held.next()).toBeUndefined();
  });
});
