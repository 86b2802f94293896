import type { FerryError } from "@ferry/protocol";

/**
 * Who a request acts for: an API key's tenant, the admin (who sees every tenant's work), or
 * the one open tenant when no keys are configured.
 */
export interface Tenant {
  /** Stored as the owner of jobs, batches and predictions; "" is the open tenant. */
  id: string;
  admin: boolean;
  /** The highest priority it may ask, when it may not ask every one (KEY_MAX_PRIORITY). */
  maxPriority?: number | undefined;
}

export const OPEN_TENANT: Tenant = { id: "", admin: false };

/** Whether `tenant` may see what `owner` created (records from before owners count as open). */
export function canSee(tenant: Tenant, owner: string | undefined): boolean {
  return tenant.admin || (owner ?? "") === tenant.id;
}

/**
 * Another tenant's id reads as an unknown one: a 404, not a 403, so that ids cannot be probed
 * for existence.
 */
export function assertVisible(
  tenant: Tenant,
  owner: string | undefined,
  notFound: () => FerryError,
): void {
  if (!canSee(tenant, owner)) throw notFound();
}

/**
 * The job meta field that keeps a job out of `/v1/jobs` (a `store: false` response's): its
 * request asked that what it sent and got not be kept, so it is never read back, and its job
 * is forgotten once answered.
 */
export const UNLISTED = "unlisted";

/**
 * Whether `tenant` is one API key among those a deployment serves (not the admin, not the one
 * tenant of an open API): what it queues is held to its share of a queue (KEY_QUEUE_SHARE).
 */
export function oneOfSeveral(tenant: Tenant): boolean {
  // (a batch's lines run as its owner, the admin's too: by its id)
  return !tenant.admin && tenant.id !== "" && tenant.id !== ADMIN_ID;
}

/** The admin's tenant id: what it makes is its own. */
export const ADMIN_ID = "admin";
