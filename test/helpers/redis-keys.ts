import { createRedis, primaries } from "@ferry/transport";
import { REDIS_TARGET } from "./stack.js";

/**
 * Keys under `prefix` matching `pattern` (jobs stored, say), read from the test's Redis: every
 * primary of a cluster when REDIS_CLUSTER_NODES names one.
 */
export async function countKeys(prefix: string, pattern: string): Promise<number> {
  const redis = createRedis(REDIS_TARGET, { maxRetriesPerRequest: 1 });
  try {
    let n = 0;
    for (const node of await primaries(redis)) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", `${prefix}:${pattern}`);
        cursor = next;
        n += keys.length;
      } while (cursor !== "0");
    }
    return n;
  } finally {
    redis.disconnect();
  }
}
