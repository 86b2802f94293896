import { FerryError } from "@ferry/protocol";
import type { MiddlewareHandler } from "hono";
import type { Tenant } from "../tenant.js";

export interface TenantLimitOptions {
  /** Requests per second a tenant may start, refilled continuously; unset: no rate limit. */
  ratePerS?: number | undefined;
  /** Requests a tenant may start at once after a pause. @defaultValue max(1, 2 x ratePerS) */
  burst?: number | undefined;
  /** Requests of one tenant open at once; unset: no cap. */
  maxConcurrent?: number | undefined;
}

interface Bucket {
  tokens: number;
  at: number;
  open: number;
}

/**
 * Per-tenant rate limit (a token bucket) and concurrency cap, per API process: with N
 * replicas behind a balancer a tenant gets about N times the figures. 429 with Retry-After
 * beyond either. The admin is never limited.
 */
export function tenantLimits(options: TenantLimitOptions): MiddlewareHandler {
  const { ratePerS, maxConcurrent } = options;
  if (ratePerS === undefined && maxConcurrent === undefined) return (_c, next) => next();
  const burst = options.burst ?? Math.max(1, 2 * (ratePerS ?? 0));
  const buckets = new Map<string, Bucket>();
  return async (c, next) => {
    const tenant = c.get("tenant") as Tenant | undefined;
    if (!tenant || tenant.admin || c.req.path.startsWith("/v2/health/")) return next();
    const now = performance.now();
    let bucket = buckets.get(tenant.id);
    if (!bucket) {
      bucket = { tokens: burst, at: now, open: 0 };
      buckets.set(tenant.id, bucket);
    }
    if (ratePerS !== undefined) {
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * ratePerS);
      bucket.at = now;
      if (bucket.tokens < 1) {
        const waitS = Math.ceil((1 - bucket.tokens) / ratePerS);
        throw FerryError.refusal("QUEUE_FULL", `Rate limit of ${ratePerS} requests/s reached`, {
          retryAfterS: waitS,
        });
      }
    }
    if (maxConcurrent !== undefined && bucket.open >= maxConcurrent) {
      throw FerryError.refusal(
        "QUEUE_FULL",
        `Too many requests open at once for this key (limit ${maxConcurrent})`,
        { retryAfterS: 1 },
      );
    }
    if (ratePerS !== undefined) bucket.tokens -= 1;
    bucket.open++;
    try {
      await next();
    } finally {
      bucket.open--;
    }
  };
}
