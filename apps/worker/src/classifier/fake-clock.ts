import type { Clock } from "./clock.js";

interface Timer {
  at: number;
  fn: () => void;
  id: number;
}

/** A Clock that only moves when told to, for exact tests of time-based behaviour. */
export class FakeClock implements Clock {
  private time = 0;
  private timers: Timer[] = [];
  private nextId = 0;

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const timer = { at: this.time + ms, fn, id: this.nextId++ };
    this.timers.push(timer);
    return timer.id;
  }

  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }

  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.time = due.at;
      due.fn();
    }
    this.time = until;
  }

  get pendingTimers(): number {
    return this.timers.length;
  }
}
