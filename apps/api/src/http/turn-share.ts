/**
 * Caps the request work one event-loop turn does, so that the turn ends and the next one reads
 * the sockets again. A Node server parses every request that arrived in one turn, in that
 * turn: under a flood of admitted requests each turn grew to hundreds of milliseconds, and
 * everything else waited unread behind it (a refusal took as long as an answer, a readiness
 * probe up to 0.8 s). With a share, a request past the turn's budget waits in a FIFO that
 * later turns work through, a slice each, between reads: refusals, probes and answers are
 * served every slice, and the queue of admitted work is in the process, where admission
 * counts it, not in socket buffers nobody sees.
 *
 * Usage: `const wait = share.take(); if (wait) await wait;` then the work, synchronously as far
 * as it goes. While no turn is busy `take` returns undefined and costs a clock read.
 */
export class TurnShare {
  /** When this turn's first share was taken (reset at the turn's check phase). */
  private turnStartedAt: number | undefined;
  private readonly waiting: Array<() => void> = [];
  private draining = false;
  /** When the last slice ended with work left (undefined once the queue ran dry). */
  private lastSliceEnded: number | undefined;

  constructor(
    /** Work one turn may do before what comes next waits for a later turn, in ms. */
    private readonly sliceMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Requests waiting for a later turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /** undefined: go on now; else a promise that resolves when this caller's turn has come. */
  take(): Promise<void> | undefined {
    if (!this.draining) {
      const now = this.now();
      if (this.turnStartedAt === undefined) {
        this.turnStartedAt = now;
        setImmediate(this.endTurn);
      }
      if (now - this.turnStartedAt < this.sliceMs) return undefined;
    }
    const turn = new Promise<void>((resolve) => this.waiting.push(resolve));
    if (!this.draining) {
      this.draining = true;
      setImmediate(this.drain);
    }
    return turn;
  }

  private readonly endTurn = (): void => {
    this.turnStartedAt = undefined;
  };

  /**
   * One slice: lets waiters go one at a time, each one's synchronous work (and whatever
   * microtasks it queued first) done before the clock is read for the next; what is left
   * waits for the next turn's check phase, after its poll phase has read the sockets. A slice
   * lasts `sliceMs`, or as long as the rest of the loop took since the last one if that was
   * longer: a flood of cheap refusals must not starve the admitted requests' parsing.
   */
  private readonly drain = (): void => {
    const started = this.now();
    const budget = Math.max(this.sliceMs, started - (this.lastSliceEnded ?? started));
    const step = (): void => {
      if (this.waiting.length === 0) {
        this.draining = false;
        this.lastSliceEnded = undefined;
        return;
      }
      const now = this.now();
      if (now - started >= budget) {
        this.lastSliceEnded = now;
        setImmediate(this.drain);
        return;
      }
      this.waiting.shift()?.();
      // after the continuation this resolves (queued first), so the clock includes its work
      queueMicrotask(step);
    };
    step();
  };
}
