import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";

export interface WorkerHeartbeat {
  id: string;
  /** "model.vN" queue names this worker consumes. */
  queues: string[];
  /** Epoch ms after which the entry counts as dead. */
  expires_at: number;
  started_at: number;
}

/** How often a worker refreshes its heartbeat, and how long one stays valid, in ms. */
export const HEARTBEAT_INTERVAL_MS = 2_000;
export const HEARTBEAT_TTL_MS = 6_000;

/**
 * Which workers are alive and what they serve, shared through one Redis hash so that any API
 * replica can answer /health without asking the workers.
 */
export class WorkerRegistry {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  async beat(heartbeat: Omit<WorkerHeartbeat, "expires_at">): Promise<void> {
    const entry: WorkerHeartbeat = { ...heartbeat, expires_at: Date.now() + HEARTBEAT_TTL_MS };
    await this.redis.hset(this.keys.workers, heartbeat.id, JSON.stringify(entry));
  }

  async remove(id: string): Promise<void> {
    await this.redis.hdel(this.keys.workers, id);
  }

  /** A worker's latest heartbeat; undefined when it has none. */
  async entry(id: string): Promise<WorkerHeartbeat | undefined> {
    const raw = await this.redis.hget(this.keys.workers, id);
    return raw === null ? undefined : (JSON.parse(raw) as WorkerHeartbeat);
  }

  /** Live workers; entries past their expiry are dropped from the hash on the way. */
  async live(): Promise<WorkerHeartbeat[]> {
    const all = await this.redis.hgetall(this.keys.workers);
    const now = Date.now();
    const live: WorkerHeartbeat[] = [];
    const dead: string[] = [];
    for (const [id, raw] of Object.entries(all)) {
      const hb = JSON.parse(raw) as WorkerHeartbeat;
      if (hb.expires_at > now) live.push(hb);
      else if (hb.expires_at < now - 60_000) dead.push(id);
    }
    if (dead.length > 0) await this.redis.hdel(this.keys.workers, ...dead);
    return live;
  }

  /** Live workers per queue name ("model.vN"). */
  async perQueue(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for (const w of await this.live())
      for (const q of w.queues) counts.set(q, (counts.get(q) ?? 0) + 1);
    return counts;
  }
}
