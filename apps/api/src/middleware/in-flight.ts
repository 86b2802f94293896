import type { MiddlewareHandler } from "hono";
import { IdleWaiters } from "../http/idle-waiters.js";

/** Counts requests being answered, so that a drain can wait for the last one. */
export class InFlight {
  private count = 0;
  private readonly idle = new IdleWaiters();

  middleware(): MiddlewareHandler {
    return async (_c, next) => {
      this.enter();
      try {
        await next();
      } finally {
        this.leave();
      }
    };
  }

  /** A request outside Hono (the predict fast path) counts itself in, then out. */
  enter(): void {
    this.count++;
  }

  leave(): void {
    this.count--;
    if (this.count === 0) this.idle.wake();
  }

  get size(): number {
    return this.count;
  }

  /** Resolves when no request is open, or after `timeoutMs`. */
  settled(timeoutMs: number): Promise<void> {
    return this.idle.wait(this.count === 0, timeoutMs);
  }
}
