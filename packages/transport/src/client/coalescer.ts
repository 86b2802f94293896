import type { InferRow } from "@ferry/protocol";

export interface CoalescedGroup {
  queue: string;
  priority: number;
  rows: InferRow[];
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

  push(queue: string, priority: number, maxRows: number, row: InferRow): void {
    const key = `${queue}\u0000${priority}`;
    let group = this.open.get(key);
    if (!group) {
      group = { queue, priority, rows: [] };
      this.open.set(key, group);
    }
    group.rows.push(row);
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
