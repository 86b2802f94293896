import { FerryError } from "@ferry/protocol";
import { type RedisClient, waitForReplicas } from "./connection.js";

/** Replicas an accepted write must have reached before it is acknowledged, and how long that may take. */
export interface AcceptReplicas {
  replicas: number;
  timeoutMs: number;
}

/**
 * Makes an accept durable past a failover: returns once `replicas` replicas of every shard
 * that `written` (keys this connection wrote the accept to) lives on hold it. Otherwise the
 * work is still queued and may run, so the caller is told to poll `poll`, not to send again.
 */
export async function ensureReplicated(
  redis: RedisClient,
  written: readonly string[],
  accept: AcceptReplicas,
  what: string,
  poll: string,
): Promise<void> {
  if (accept.replicas <= 0) return;
  const acked = await waitForReplicas(redis, written, accept.replicas, accept.timeoutMs);
  if (acked < accept.replicas)
    throw new FerryError(
      "UNAVAILABLE",
      `${what} is queued but reached ${acked} of ${accept.replicas} replicas within ${accept.timeoutMs} ms; poll ${poll} before sending it again`,
      { retryAfterS: 1 },
    );
}
