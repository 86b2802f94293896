import { Redis, type RedisOptions } from "ioredis";

/**
 * A Redis connection as BullMQ wants it: `maxRetriesPerRequest: null` so that blocking
 * commands wait through a reconnect instead of failing, and a capped reconnect backoff.
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    retryStrategy: (times) => Math.min(times * 100, 2_000),
    ...options,
  });
}

/** How long a request-path command may wait for Redis before it fails, in ms. */
export const COMMAND_TIMEOUT_MS = 1_000;

/**
 * A connection for request paths that must fail fast while Redis is down (503 in a
 * millisecond budget, not a hang): no offline queue, a bounded number of retries, and a
 * command timeout, since a Redis that stops answering (paused, swapping, partitioned without
 * a reset) keeps its socket open and would otherwise hold every request forever.
 */
export function createFastFailRedis(url: string, options: RedisOptions = {}): Redis {
  return createRedis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    ...options,
  });
}

/** True when something answers PING at `url` within `timeoutMs`. */
export async function pingRedis(url: string, timeoutMs = 1_000): Promise<boolean> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** Deletes every key under `prefix:` (a test's or a torn-down deployment's); returns the count. */
export async function deletePrefix(url: string, prefix: string): Promise<number> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  let deleted = 0;
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) deleted += await redis.unlink(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return deleted;
}
