/**
 * At most `size` lines in flight: one waiter at a time (the dispatch loop), woken as a line
 * ends, so a slot costs no promise per line in flight (as `Promise.race` over them would).
 */
export class Slots {
  private used = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly size: number) {}

  async take(): Promise<void> {
    while (this.used >= this.size) await new Promise<void>((resolve) => (this.wake = resolve));
    this.used++;
  }

  give(): void {
    this.used--;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Resolves once every slot is free again. */
  async drained(): Promise<void> {
    while (this.used > 0) await new Promise<void>((resolve) => (this.wake = resolve));
  }
}
