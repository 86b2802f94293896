import { FerryError } from "@ferry/protocol";
import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { errorResponse } from "../http/errors.js";
import type { Tenant } from "../http/tenant.js";
import { lingering } from "../http/upload.js";
import { streamedBody } from "./body-limits.js";

/** Bodies smaller than this are not counted: parsing one costs the loop what any request does. */
export const LARGE_BODY_BYTES = 64 * 1024;

export interface BodyRateOptions {
  /** Bytes of large bodies a tenant may send a second, refilled continuously. */
  bytesPerS: number;
  /** Bytes it may send at once after a pause: at least the largest body one request may have. */
  burst: number;
}

/**
 * Counts a request's body of `bytes` against `tenant`'s rate, or refuses it (429) before
 * any of it is parsed. `undefined`: no limit configured.
 */
export type BodyRateLimiter = (tenant: Tenant | undefined, bytes: number) => void;

/**
 * Large JSON bodies per tenant, per API process (KEY_BODY_BYTES_PER_S): parsing and checking
 * one is the API's event loop's alone, ~100-150 ms for 8 MB, and a key that sent them back to
 * back held every other key's requests behind them (a neighbour's predict p50 1.3 -> 128 ms).
 * A token bucket of bytes: a request is let in while its tenant's bucket is not in debt, and
 * its body's bytes then taken (so one body as large as MAX_BODY_BYTES always passes after a
 * pause); in debt, 429 with the time to pay it back. Bodies under LARGE_BODY_BYTES are not
 * counted, nor the admin's; streamed uploads (NDJSON batches, files) are parsed off the loop
 * and never reach it.
 */
export function bodyRateLimiter(options: BodyRateOptions): BodyRateLimiter {
  const { bytesPerS, burst } = options;
  const buckets = new Map<string, { tokens: number; at: number }>();
  return (tenant, bytes) => {
    if (!tenant || tenant.admin || bytes < LARGE_BODY_BYTES) return;
    const now = performance.now();
    let bucket = buckets.get(tenant.id);
    if (!bucket) {
      bucket = { tokens: burst, at: now };
      buckets.set(tenant.id, bucket);
    }
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * bytesPerS);
    bucket.at = now;
    if (bucket.tokens <= 0)
      throw FerryError.refusal(
        "QUEUE_FULL",
        `This key sends large request bodies faster than the ${bytesPerS} bytes a second one key may (KEY_BODY_BYTES_PER_S); for bulk work use a batch (NDJSON or the Batch API)`,
        { retryAfterS: Math.max(1, Math.ceil(-bucket.tokens / bytesPerS)) },
      );
    bucket.tokens -= bytes;
  };
}

/**
 * The rule above as middleware, after authentication: a declared length is counted before the
 * body is read (a refusal reads it out, as a 413 does), a chunked one once `bodyLimits` has
 * read it whole.
 */
export function keyBodyRate(limit: BodyRateLimiter | undefined): MiddlewareHandler {
  if (!limit) return (_c, next) => next();
  return async (c, next) => {
    if (streamedBody(c)) return next();
    const declared = c.req.header("Content-Length");
    const bytes =
      declared !== undefined
        ? Number(declared)
        : c.req.header("Transfer-Encoding") !== undefined
          ? (await c.req.arrayBuffer()).byteLength
          : 0;
    try {
      limit(c.get("tenant") as Tenant | undefined, bytes);
    } catch (err) {
      if (!(err instanceof FerryError)) throw err;
      const refusal = errorResponse(c, err);
      const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
      return declared !== undefined && incoming ? lingering(refusal, incoming) : refusal;
    }
    await next();
  };
}
