import { FerryError } from "@ferry/protocol";
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { errorResponse } from "../http/errors.js";
import type { Tenant } from "../http/tenant.js";
import { lingering } from "../http/upload.js";
import type { HonoEnv } from "../services.js";
import { streamedBody } from "./body-limits.js";

/** Bodies smaller than this are not counted: parsing one costs the loop what any request does. */
export const LARGE_BODY_BYTES = 64 * 1024;

export interface BodyRateOptions {
  /** Bytes of large bodies a sender may send a second, refilled continuously. */
  bytesPerS: number;
  /** Bytes it may send at once after a pause: at least the largest body one request may have. */
  burst: number;
}

/**
 * Large JSON bodies per sender, per API process (KEY_BODY_BYTES_PER_S): parsing and checking
 * one is the API's event loop's alone, ~100-150 ms for 8 MB, and a key that sent them back to
 * back held every other key's requests behind them (a neighbour's predict p50 1.3 -> 128 ms).
 * A token bucket of bytes: a request is let in while its sender's bucket is not in debt, and
 * its body's bytes then taken, and once read the rest of its weight (`takeWeight`: what
 * parsing it costs, so one body as large as MAX_BODY_BYTES always passes after a pause); in
 * debt, 429 with the time to pay it back. The sender is the API key's tenant, or
 * with API_KEYS unset (one open tenant) the client's address. Bodies under LARGE_BODY_BYTES
 * are not counted, nor the admin's; streamed uploads (NDJSON batches, files) are parsed off
 * the loop and never reach it.
 */
export class BodyRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly options: BodyRateOptions) {}

  /** Who a request's bytes are counted against; undefined for one never held (the admin). */
  static sender(tenant: Tenant | undefined, address: string | undefined): string | undefined {
    if (!tenant || tenant.admin) return undefined;
    return tenant.id === "" ? `address:${address ?? ""}` : tenant.id;
  }

  /** Refuses (429) a sender in debt, before its body is read. */
  assertNotInDebt(sender: string | undefined): void {
    if (sender === undefined) return;
    const bucket = this.refilled(sender);
    if (bucket.tokens > 0) return;
    const { bytesPerS } = this.options;
    throw FerryError.refusal(
      "QUEUE_FULL",
      `This key sends large request bodies faster than the ${bytesPerS} bytes a second one key may (KEY_BODY_BYTES_PER_S); for bulk work use a batch (NDJSON or the Batch API)`,
      { retryAfterS: Math.max(1, Math.ceil(-bucket.tokens / bytesPerS)) },
    );
  }

  /** Counts a body of `bytes` (refusing a sender in debt, as `assertNotInDebt`). */
  take(sender: string | undefined, bytes: number): void {
    if (sender === undefined || bytes < LARGE_BODY_BYTES) return;
    this.assertNotInDebt(sender);
    this.refilled(sender).tokens -= bytes;
  }

  /**
   * Counts the rest of a body read whole, whose `weight` (`jsonWeight`) says what parsing it
   * costs: `take` counted its `bytes` by its declared length, a body under LARGE_BODY_BYTES not
   * at all (refused here in debt, as `take` would have, if its weight is large).
   */
  takeWeight(sender: string | undefined, bytes: number, weight: number): void {
    if (sender === undefined || weight < LARGE_BODY_BYTES) return;
    const counted = bytes < LARGE_BODY_BYTES ? 0 : bytes;
    if (counted === 0) this.assertNotInDebt(sender);
    this.refilled(sender).tokens -= Math.max(0, weight - counted);
  }

  private refilled(sender: string): { tokens: number; at: number } {
    const { bytesPerS, burst } = this.options;
    const now = performance.now();
    let bucket = this.buckets.get(sender);
    if (!bucket) {
      bucket = { tokens: burst, at: now };
      this.buckets.set(sender, bucket);
    }
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * bytesPerS);
    bucket.at = now;
    if (this.buckets.size > MAX_SENDERS) this.sweep(now, sender);
    return bucket;
  }

  /**
   * Drops the buckets full again (they say nothing a new one would not), so that one per
   * client address ever seen does not stay.
   */
  private sweep(now: number, keep: string): void {
    const { bytesPerS, burst } = this.options;
    for (const [sender, bucket] of this.buckets)
      if (sender !== keep && bucket.tokens + ((now - bucket.at) / 1000) * bytesPerS >= burst)
        this.buckets.delete(sender);
  }
}

/** Senders' buckets kept before those full again are dropped. */
const MAX_SENDERS = 10_000;

/**
 * What `bodyLimits` asks before it reads a chunked body (of unknown length): its sender, in
 * debt, is refused before a byte of it is read. A request whose key is wrong is let through,
 * for its route's authentication to refuse.
 */
export function chunkedRefusal(
  limit: BodyRateLimiter | undefined,
  authenticate: (authorization: string | undefined, path: string) => Tenant,
): ((c: Context) => void) | undefined {
  if (!limit) return undefined;
  return (c) => {
    let tenant: Tenant;
    try {
      tenant = authenticate(c.req.header("Authorization"), c.req.path);
    } catch {
      return;
    }
    limit.assertNotInDebt(BodyRateLimiter.sender(tenant, addressOf(c)));
  };
}

/** The client's address, as a sender with no key is told apart. */
export function addressOf(c: Context): string | undefined {
  return (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket.remoteAddress;
}

/**
 * The rule above as middleware, after authentication: a declared length is counted before the
 * body is read (a refusal reads it out, as a 413 does); a chunked one's sender is refused in
 * debt before `bodyLimits` reads it (see `chunkedRefusal`), and counted once it was read.
 */
export function keyBodyRate(limit: BodyRateLimiter | undefined): MiddlewareHandler<HonoEnv> {
  if (!limit) return (_c, next) => next();
  return async (c, next) => {
    if (streamedBody(c)) return next();
    const sender = BodyRateLimiter.sender(c.get("tenant"), addressOf(c));
    const declared = c.req.header("Content-Length");
    try {
      const bytes = declared !== undefined ? Number(declared) || 0 : (c.get("bodyBytes") ?? 0);
      limit.take(sender, bytes);
    } catch (err) {
      if (!(err instanceof FerryError)) throw err;
      const refusal = errorResponse(c, err);
      const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
      return declared !== undefined && incoming ? lingering(refusal, incoming) : refusal;
    }
    await next();
  };
}
