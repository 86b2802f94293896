import type { InferRow } from "@ferry/protocol";

/** Where one row's answer may already be: its queue's cache buckets and its field in them. */
export interface RowLookup {
  buckets: readonly [string, string];
  /** Answers stored before this (epoch ms) are stale. */
  cutoff: number;
  field: string;
}

export interface CoalescedGroup {
  queue: string;
  priority: number;
  rows: InferRow[];
  /** Per row, its cache lookup (undefined: none); absent when no row of the group has one. */
  lookups?: Array<RowLookup | undefined>;
}

/**
 * Gathers the rows that arrive for one queue and priority within one turn of the event loop
 * into one group, at most `maxRows` each. Under load many requests land per turn, so the
 * per-group Redis work (one XADD, one read, one acknowledgement) is shared; at light load a
 * group is one row and waits for nothing but the current turn.
 */
export class Coalescer {
  private readonly open = new Map<string, CoalescedGroup>();
  private scheduled = false;

  constructor(private readonly flush: (group: CoalescedGroup) => void) {}

  push(queue: string, priority: number, maxRows: number, row: InferRow, lookup?: RowLookup): void {
    const key = `${queue}\u0000${priority}`;
    let group = this.open.get(key);
    if (!group) {
      group = { queue, priority, rows: [] };
      this.open.set(key, group);
    }
    if (lookup && !group.lookups) group.lookups = group.rows.map(() => undefined);
    group.rows.push(row);
    group.lookups?.push(lookup);
    if (group.rows.length >= maxRows) {
      this.open.delete(key);
      this.flush(group);
      return;
    }
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flushAll());
    }
  }

  private flushAll(): void {
    this.scheduled = false;
    const groups = [...this.open.values()];
    this.open.clear();
    for (const group of groups) this.flush(group);
  }
}
