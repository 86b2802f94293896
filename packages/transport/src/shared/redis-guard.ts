import { FerryError } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";

/** Fails fast (503) while the connection is down, instead of queueing the command. */
export function assertReady(redis: RedisClient): void {
  if (redis.status !== "ready")
    throw new FerryError("UNAVAILABLE", "Redis is unreachable", { retryAfterS: 1 });
}

/**
 * A failure of this process's own code around a call (a stack overflowed writing a value, a
 * wrong type), not of Redis: sending it again fails the same way, so it is no 503 to retry.
 */
function ownFailure(err: unknown): boolean {
  return (
    err instanceof RangeError ||
    err instanceof TypeError ||
    err instanceof SyntaxError ||
    err instanceof ReferenceError
  );
}

/** Runs a Redis call; a failure of Redis is a 503 the client may retry. */
export async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    // a value too deeply nested to write had been "Redis error: Maximum call stack size
    // exceeded", a 503 that clients and batch runners retried until their deadline
    if (err instanceof FerryError || ownFailure(err)) throw err;
    throw new FerryError(
      "UNAVAILABLE",
      `Redis error: ${err instanceof Error ? err.message : String(err)}`,
      {
        retryAfterS: 1,
        cause: err,
      },
    );
  }
}

/**
 * ioredis' own failures of a command that may succeed when sent again: its timeout, a
 * connection lost or closed under it, its retries of a reconnect used up. Raised outside
 * `guarded` they are still Redis being unavailable (a 503 with Retry-After), not a bug (a
 * 500): an OpenAI batch line that met one under load was failed for good as "internal error".
 */
const UNAVAILABLE_MESSAGES = [
  /^Command timed out$/,
  /^Connection is closed\.?$/,
  /^Stream isn't writeable/,
  /^Reached the max retries per request limit/,
];

/** The 503 a raw Redis client failure stands for; undefined for anything else. */
export function redisUnavailable(err: unknown): FerryError | undefined {
  if (!(err instanceof Error) || err instanceof FerryError) return undefined;
  if (!UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(err.message))) return undefined;
  return new FerryError("UNAVAILABLE", `Redis error: ${err.message}`, {
    retryAfterS: 1,
    cause: err,
  });
}
