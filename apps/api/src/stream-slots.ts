import { FerryError } from "@ferry/protocol";
import type { Tenant } from "./tenant.js";

/**
 * Caps the event streams (SSE) one API process holds open, in all and per tenant: each holds
 * a socket, buffers and a Redis subscription for as long as its client likes. A slot is taken
 * before any work is queued, so a refused stream costs nothing.
 */
export class StreamSlots {
  private total = 0;
  private readonly perTenant = new Map<string, number>();

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerTenant: number,
  ) {}

  get open(): number {
    return this.total;
  }

  /** Takes a slot or refuses: 503 when the process is full, 429 when the tenant is. */
  acquire(tenant: Tenant): () => void {
    if (this.total >= this.maxTotal)
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
    this.total++;
    this.perTenant.set(tenant.id, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.perTenant.get(tenant.id) ?? 1) - 1;
      if (left === 0) this.perTenant.delete(tenant.id);
      else this.perTenant.set(tenant.id, left);
    };
  }
}
