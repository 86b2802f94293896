import type { MiddlewareHandler } from "hono";

/** Counts requests being answered, so that a drain can wait for the last one. */
export class InFlight {
  private count = 0;
  private waiters: Array<() => void> = [];

  middleware(): MiddlewareHandler {
    return async (_c, next) => {
      this.count++;
      try {
        await next();
      } finally {
        this.count--;
        if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
      }
    };
  }

  get size(): number {
    return this.count;
  }

  /** Resolves when no request is open, or after `timeoutMs`. */
  settled(timeoutMs: number): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      setTimeout(resolve, timeoutMs).unref();
    });
  }
}
