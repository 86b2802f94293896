/**
 * Reads of consecutive indexes with up to `ahead` of them in flight: `read(at)` also starts
 * the reads after `at` not started yet, so that a caller walking the indexes in order finds
 * each read done or under way rather than waiting one round trip after another. A read that
 * is never asked for (the walk stopped first) settles unheard, its failure included.
 */
export class ReadAhead<T> {
  private readonly started = new Map<number, Promise<T>>();

  constructor(
    private readonly ahead: number,
    private readonly fetch: (at: number) => Promise<T>,
  ) {}

  read(at: number): Promise<T> {
    for (let k = at; k < at + this.ahead; k++) {
      if (this.started.has(k)) continue;
      const reading = this.fetch(k);
      reading.catch(() => undefined);
      this.started.set(k, reading);
    }
    const reading = this.started.get(at) as Promise<T>;
    this.started.delete(at);
    return reading;
  }
}
