import type { GrammarGuide } from "./grammar-guide.js";

/** A guide whose open waits its turn, and whoever waits for that open to be answered. */
export interface HeldOpen {
  guide: GrammarGuide;
  settle: Array<() => void>;
}

/**
 * The guides whose (re)open waits for the grammar thread, oldest first, one entry a guide
 * however many wait for it: one compile is on the thread at a time, so a mask waits behind
 * one grammar at most, and an open given up while it waits is never compiled.
 */
export class HeldOpens {
  private readonly line: HeldOpen[] = [];
  private readonly bySeq = new Map<number, HeldOpen>();

  /** Whether guide `seq`'s open waits its turn. */
  holds(seq: number): boolean {
    return this.bySeq.has(seq);
  }

  /** Holds the guide's open (once: a second waiter joins the first's entry). */
  hold(guide: GrammarGuide, settled: () => void): void {
    if (this.join(guide.seq, [settled])) return;
    const entry = { guide, settle: [settled] };
    this.line.push(entry);
    this.bySeq.set(guide.seq, entry);
  }

  /** Adds `settle` to guide `seq`'s held open, if it is held. */
  join(seq: number, settle: ReadonlyArray<() => void>): boolean {
    const held = this.bySeq.get(seq);
    if (held) held.settle.push(...settle);
    return held !== undefined;
  }

  /** The oldest held open, out of the line. */
  next(): HeldOpen | undefined {
    const next = this.line.shift();
    if (next) this.bySeq.delete(next.guide.seq);
    return next;
  }

  /** Empties the line; returns whoever waited on it. */
  drop(): Array<() => void> {
    const waiting = this.line.splice(0).flatMap(({ settle }) => settle);
    this.bySeq.clear();
    return waiting;
  }
}
