/**
 * Callers waiting for something to have nothing open (requests, streams), each with a time
 * limit of its own: what a drain waits on.
 */
export class IdleWaiters {
  private waiters: Array<() => void> = [];

  /** Resolves at once when `idle`, else at the next `wake`, or after `timeoutMs`. */
  wait(idle: boolean, timeoutMs: number): Promise<void> {
    if (idle) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      setTimeout(resolve, timeoutMs).unref();
    });
  }

  /** Nothing is open any more: every waiter resolves. */
  wake(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
