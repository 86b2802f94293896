import { FerryError } from "@ferry/protocol";
import type { RedisClient } from "./connection.js";

/** Fails fast (503) while the connection is down, instead of queueing the command. */
export function assertReady(redis: RedisClient): void {
  if (redis.status !== "ready")
    throw new FerryError("UNAVAILABLE", "Redis is unreachable", { retryAfterS: 1 });
}

/** Runs a Redis call; any failure of it is a 503 the client may retry. */
export async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof FerryError) throw err;
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
