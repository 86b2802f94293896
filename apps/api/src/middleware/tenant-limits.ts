import { FerryError } from "@ferry/protocol";
import type { MiddlewareHandler } from "hono";
import type { Tenant } from "../http/tenant.js";

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
export function tenantLimits(enter: TenantLimiter | undefined): MiddlewareHandler {
  if (!enter) return (_c, next) => next();
  return async (c, next) => {
    const leave = enter(c.get("tenant") as Tenant | undefined, c.req.path);
    try {
      await next();
    } finally {
      leave();
    }
  };
}

/** Counts a request of `tenant` on `path` in (or refuses it) and returns what counts it out. */
export type TenantLimiter = (tenant: Tenant | undefined, path: string) => () => void;

/**
 * The rule of `tenantLimits`, shared with callers outside Hono (the predict fast path): one
 * limiter per process, whichever path a request takes. Undefined when no limit is configured.
 */
export function tenantLimiter(options: TenantLimitOptions): TenantLimiter | undefined {
  const { ratePerS, maxConcurrent } = options;
  if (ratePerS === undefined && maxConcurrent === undefined) return undefined;
  const burst = options.burst ?? Math.max(1, 2 * (ratePerS ?? 0));
  const buckets = new Map<string, Bucket>();
  const nothing = () => {};
  return (tenant, path) => {
    if (!tenant || tenant.admin || path.startsWith("/v2/health/")) return nothing;
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
    const counted = bucket;
    return () => {
      counted.open--;
    };
  };
}
