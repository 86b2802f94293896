import { FerryError } from "@ferry/protocol";
import { IdleWaiters } from "./idle-waiters.js";
import type { Tenant } from "./tenant.js";

/** One open event stream's hold on its slot. */
export interface StreamSlot {
  /** Gives the slot back (idempotent). */
  release(): void;
  /** Aborted when the process must end its streams now (a drain that ran out of time). */
  closing: AbortSignal;
}

/**
 * Caps the event streams (SSE) one API process holds open, in all and per tenant: each holds
 * a socket, buffers and a Redis subscription for as long as its client likes. A slot is taken
 * before any work is queued, so a refused stream costs nothing. A draining process waits for
 * its streams here before it exits.
 */
export class StreamSlots {
  private readonly perTenant = new Map<string, number>();
  private readonly held = new Set<AbortController>();
  private readonly idle = new IdleWaiters();

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerTenant: number,
  ) {}

  get open(): number {
    return this.held.size;
  }

  /** Takes a slot or refuses: 503 when the process is full, 429 when the tenant is. */
  acquire(tenant: Tenant): StreamSlot {
    if (this.held.size >= this.maxTotal)
      throw new FerryError(
        "UNAVAILABLE",
        `This API process holds ${this.maxTotal} open streams, its limit`,
        { retryAfterS: 1 },
      );
    const mine = this.perTenant.get(tenant.id) ?? 0;
    if (!tenant.admin && mine >= this.maxPerTenant)
      throw new FerryError(
        "QUEUE_FULL",
        `Too many open streams for this key (limit ${this.maxPerTenant})`,
        { retryAfterS: 1 },
      );
    const closing = new AbortController();
    this.held.add(closing);
    this.perTenant.set(tenant.id, mine + 1);
    return {
      closing: closing.signal,
      release: () => {
        if (!this.held.delete(closing)) return;
        const left = (this.perTenant.get(tenant.id) ?? 1) - 1;
        if (left === 0) this.perTenant.delete(tenant.id);
        else this.perTenant.set(tenant.id, left);
        if (this.held.size === 0) this.idle.wake();
      },
    };
  }

  /** Resolves when no stream is open, or after `timeoutMs`. */
  settled(timeoutMs: number): Promise<void> {
    return this.idle.wait(this.held.size === 0, timeoutMs);
  }

  /** Tells every open stream to end now; resolves once they have (or after `timeoutMs`). */
  closeAll(timeoutMs: number): Promise<void> {
    for (const closing of this.held) closing.abort();
    return this.settled(timeoutMs);
  }
}
