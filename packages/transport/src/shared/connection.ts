import { once } from "node:events";
import { messageOf } from "@ferry/protocol";
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import { tolerateEventLoopDelays } from "./command-timeout.js";

/** A connection to a deployment's Redis: one server, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * Where a deployment's Redis is: one server at `url`, or, when `clusterNodes` lists any, a
 * Redis Cluster reached through those seed nodes ("host:port"); the cluster's other nodes
 * are found from them. Credentials and TLS of `url` apply to every cluster node.
 */
export interface RedisTarget {
  url: string;
  clusterNodes?: readonly string[] | undefined;
}

export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as Cluster).isCluster === true;
}

/**
 * Runs `send`, whose commands to one server leave in one write: the connection's socket is
 * corked while it runs. What ioredis' auto-pipelining gave a turn's commands, without holding
 * them for another turn of the event loop. A cluster's commands go to several nodes' sockets,
 * one write each as they are made.
 */
export function inOneWrite<T>(redis: RedisClient, send: () => T): T {
  const stream = isCluster(redis) || redis.status !== "ready" ? undefined : redis.stream;
  stream?.cork();
  try {
    return send();
  } finally {
    stream?.uncork();
  }
}

export interface ConnectionOptions extends RedisOptions {
  /**
   * In cluster mode: one subscriber connection per primary for sharded pub/sub (SSUBSCRIBE),
   * so that a shard channel's messages come from the shard that owns it.
   */
  shardedSubscribers?: boolean;
}

/**
 * A Redis connection as BullMQ wants it: `maxRetriesPerRequest: null` so that blocking
 * commands wait through a reconnect instead of failing, and a capped reconnect backoff.
 */
export function createRedis(
  target: RedisTarget | string,
  options: ConnectionOptions = {},
): RedisClient {
  const { shardedSubscribers, ...redisOptions } = options;
  const base: RedisOptions = {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    retryStrategy: (times) => Math.min(times * 100, 2_000),
    ...redisOptions,
  };
  const { url, clusterNodes = [] } = typeof target === "string" ? { url: target } : target;
  if (clusterNodes.length === 0) return new Redis(url, base);
  return new Cluster(clusterNodes.map(seedNode), clusterOptions(url, base, shardedSubscribers));
}

/**
 * A cluster client. A primary's failure shows as closed connections and CLUSTERDOWN until its
 * replica is promoted (`cluster-node-timeout` and then some): commands are retried against a
 * fresh slot map meanwhile instead of failing, which is what lets a failover pass unseen.
 */
function clusterOptions(
  url: string,
  base: RedisOptions,
  shardedSubscribers: boolean | undefined,
): ClusterOptions {
  const { enableOfflineQueue, enableAutoPipelining, retryStrategy, lazyConnect, ...nodeOptions } =
    base;
  const auth = new URL(url);
  return {
    redisOptions: {
      ...nodeOptions,
      ...(auth.username ? { username: decodeURIComponent(auth.username) } : {}),
      ...(auth.password ? { password: decodeURIComponent(auth.password) } : {}),
      ...(auth.protocol === "rediss:" ? { tls: {} } : {}),
    },
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    ...(enableAutoPipelining === undefined ? {} : { enableAutoPipelining }),
    ...(lazyConnect === undefined ? {} : { lazyConnect }),
    clusterRetryStrategy: (times) => retryStrategy?.(times) ?? null,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    retryDelayOnMoved: 0,
    maxRedirections: 32,
    slotsRefreshTimeout: 2_000,
    shardedSubscribers: shardedSubscribers ?? false,
  };
}

function seedNode(node: string): { host: string; port: number } {
  const at = node.lastIndexOf(":");
  return at < 0
    ? { host: node, port: 6379 }
    : { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
}

/** How long a request-path command may wait for Redis before it fails, in ms. */
export const COMMAND_TIMEOUT_MS = 1_000;

/**
 * A connection for request paths that must fail fast while Redis is down (503 in a
 * millisecond budget, not a hang): no offline queue, a bounded number of retries, and a
 * command timeout, since a Redis that stops answering (paused, swapping, partitioned without
 * a reset) keeps its socket open and would otherwise hold every request forever. The timeout
 * counts Redis' delay, not this process's (see `tolerateEventLoopDelays`).
 */
export function createFastFailRedis(
  target: RedisTarget | string,
  options: ConnectionOptions = {},
): RedisClient {
  tolerateEventLoopDelays();
  return createRedis(target, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    ...options,
  });
}

/**
 * What answers at `target`: a Redis that PONGs ("up"), nothing at all ("absent": refused,
 * unreachable, silent), or a server that took the connection and refused the commands
 * ("refused", with what it said: a password it wants, a wrong one, a dataset still loading).
 */
export async function probeRedis(
  target: RedisTarget | string,
  timeoutMs = 1_000,
): Promise<{ state: "up" } | { state: "absent" } | { state: "refused"; reason: string }> {
  const redis = createRedis(target, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  let connected = false;
  // what the server said (a refused ready check closes the connection: the command then
  // fails with "Connection is closed", which says nothing)
  let said: string | undefined;
  redis.on("connect", () => {
    connected = true;
  });
  redis.on("error", (err: Error) => {
    if (connected && err.name === "ReplyError") said ??= err.message;
  });
  try {
    await redis.connect();
    const pong = await redis.ping();
    return pong === "PONG" ? { state: "up" } : { state: "refused", reason: String(pong) };
  } catch (err) {
    if (!connected) return { state: "absent" };
    // no Redis error: something else took the connection (another kind of server)
    return { state: "refused", reason: said ?? `no Redis reply (${messageOf(err)})` };
  } finally {
    redis.disconnect();
  }
}

/** True when something answers PING at `target` within `timeoutMs`. */
export async function pingRedis(target: RedisTarget | string, timeoutMs = 1_000): Promise<boolean> {
  return (await probeRedis(target, timeoutMs)).state === "up";
}

/**
 * The servers that hold a deployment's keys, to scan them: the one Redis, or every primary of
 * a cluster (once the cluster client knows them).
 */
export async function primaries(redis: RedisClient): Promise<Redis[]> {
  if (!isCluster(redis)) return [redis];
  if (redis.status !== "ready") await once(redis, "ready");
  return redis.nodes("master");
}

/**
 * Deletes every key under `prefix:` (a test's or a torn-down deployment's); returns the count.
 * On a cluster every primary is scanned, and keys go one by one (they live in many slots).
 */
export async function deletePrefix(target: RedisTarget | string, prefix: string): Promise<number> {
  const redis = createRedis(target, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  let deleted = 0;
  try {
    for (const node of await primaries(redis)) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
        cursor = next;
        if (keys.length === 0) continue;
        if (isCluster(redis))
          for (const n of await Promise.all(keys.map((k) => redis.unlink(k)))) deleted += n;
        else deleted += await node.unlink(...keys);
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/**
 * Waits until `replicas` replicas hold every write this connection made to the nodes serving
 * `keys` (Redis' WAIT, once per node); returns how many did within `timeoutMs` on the node
 * worst off. WAIT holds the connection meanwhile, so it is for accepting writes that must
 * survive a failover, not the hot path.
 */
export async function waitForReplicas(
  redis: RedisClient,
  keys: readonly string[],
  replicas: number,
  timeoutMs: number,
): Promise<number> {
  if (!isCluster(redis)) return Number(await redis.call("WAIT", replicas, timeoutMs));
  // a cluster pipeline goes over the connection to the node serving its keys' slot: the one
  // that carried the writes (WAIT itself names no key a cluster client could route by)
  const acked = await Promise.all(
    keys.map(async (key) => {
      const results = await redis.pipeline().exists(key).call("WAIT", replicas, timeoutMs).exec();
      const [err, n] = results?.[1] ?? [];
      if (err) throw err;
      return Number(n);
    }),
  );
  return Math.min(...acked);
}
