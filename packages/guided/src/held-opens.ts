import type { GrammarGuide } from "./grammar-guide.js";

/** A guide whose open waits its turn, and whoever waits for that open to be answered. */
export interface HeldOpen {
  guide: GrammarGuide;
  settle: Array<() => void>;
}

/** Owners whose last turn is remembered once they have nothing held: the most recent. */
const REMEMBERED_OWNERS = 1_024;

/**
 * The guides whose (re)open waits for the grammar thread, one entry a guide however many wait
 * for it: one compile is on the thread at a time, so a mask waits behind one grammar at most,
 * and an open given up while it waits is never compiled. Owners (API keys) take turns, the one
 * whose last turn is oldest (or who has had none) first, each its own opens oldest first: one
 * key's stream of costly grammars (each up to the compile budget) had held every other key's
 * guided requests of the model behind all of them.
 */
export class HeldOpens {
  /** Each owner's held opens, oldest first, and when its last turn came. */
  private readonly lines = new Map<string, { opens: HeldOpen[]; served: number }>();
  /** When the last turn came of owners with nothing held now. */
  private readonly lastServed = new Map<string, number>();
  private readonly bySeq = new Map<number, HeldOpen>();
  private turns = 0;

  /** Whether guide `seq`'s open waits its turn. */
  holds(seq: number): boolean {
    return this.bySeq.has(seq);
  }

  /** Holds the guide's open (once: a second waiter joins the first's entry). */
  hold(guide: GrammarGuide, settled: () => void): void {
    if (this.join(guide.seq, [settled])) return;
    const entry = { guide, settle: [settled] };
    let line = this.lines.get(guide.owner);
    if (!line) {
      line = { opens: [], served: this.lastServed.get(guide.owner) ?? 0 };
      this.lines.set(guide.owner, line);
    }
    line.opens.push(entry);
    this.bySeq.set(guide.seq, entry);
  }

  /** Adds `settle` to guide `seq`'s held open, if it is held. */
  join(seq: number, settle: ReadonlyArray<() => void>): boolean {
    const held = this.bySeq.get(seq);
    if (held) held.settle.push(...settle);
    return held !== undefined;
  }

  /** The oldest held open of the owner whose turn it is, out of the line. */
  next(): HeldOpen | undefined {
    let turn: [string, { opens: HeldOpen[]; served: number }] | undefined;
    // the first of equals: owners that never had a turn go in the order they came
    for (const entry of this.lines) if (!turn || entry[1].served < turn[1].served) turn = entry;
    if (!turn) return undefined;
    const [owner, line] = turn;
    const next = line.opens.shift() as HeldOpen;
    line.served = ++this.turns;
    if (line.opens.length === 0) {
      this.lines.delete(owner);
      this.lastServed.delete(owner);
      this.lastServed.set(owner, line.served);
      const oldest = this.lastServed.keys().next().value;
      if (this.lastServed.size > REMEMBERED_OWNERS && oldest !== undefined)
        this.lastServed.delete(oldest);
    }
    this.bySeq.delete(next.guide.seq);
    return next;
  }

  /** Empties the line; returns whoever waited on it. */
  drop(): Array<() => void> {
    const waiting = [...this.lines.values()].flatMap(({ opens }) =>
      opens.flatMap(({ settle }) => settle),
    );
    this.lines.clear();
    this.bySeq.clear();
    return waiting;
  }
}
