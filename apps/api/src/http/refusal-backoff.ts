import type { FerryError } from "@ferry/protocol";

/** The longest a refused call waits before it is sent again, in ms. */
const MAX_BACKOFF_MS = 5_000;

/**
 * How long a call refused for now (a full queue, a model unavailable) waits before it is sent
 * again: what the refusal's Retry-After asks, else 100 ms doubling, 5 s at most.
 */
export function refusalBackoffMs(attempt: number, error: Pick<FerryError, "retryAfterS">): number {
  const asked = (error.retryAfterS ?? 0) * 1000;
  return Math.max(asked, Math.min(MAX_BACKOFF_MS, 100 * 2 ** attempt));
}
