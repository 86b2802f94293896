import { createRedis, primaries } from "@ferry/transport";
import { REDIS_TARGET } from "./stack.js";

/**
 * Calls `visit` with each key under `prefix` matching `pattern`, and the primary that holds it,
 * read from the test's Redis: every primary of a cluster when REDIS_CLUSTER_NODES names one.
 */
export async function eachKey(
  prefix: string,
  pattern: string,
  visit: (node: RedisNode, key: string) => Promise<void> | void,
): Promise<void> {
  const redis = createRedis(REDIS_TARGET, { maxRetriesPerRequest: 1 });
  try {
    for (const node of await primaries(redis)) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(
          cursor,
          "MATCH",
          `${prefix}:${pattern}`,
          "COUNT",
          1_000,
        );
        cursor = next;
        for (const key of keys) await visit(node, key);
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
}

type RedisNode = Awaited<ReturnType<typeof primaries>>[number];

/** Keys under `prefix` matching `pattern` (jobs stored, say), read from the test's Redis. */
export async function countKeys(prefix: string, pattern: string): Promise<number> {
  let n = 0;
  await eachKey(prefix, pattern, () => {
    n++;
  });
  return n;
}
