import { Redis } from "ioredis";
import { REDIS_URL } from "./stack.js";

/** Keys under `prefix` matching `pattern` (jobs stored, say), read from the test's Redis. */
export async function countKeys(prefix: string, pattern: string): Promise<number> {
  const redis = new Redis(REDIS_URL);
  try {
    let n = 0;
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:${pattern}`);
      cursor = next;
      n += keys.length;
    } while (cursor !== "0");
    return n;
  } finally {
    redis.disconnect();
  }
}
