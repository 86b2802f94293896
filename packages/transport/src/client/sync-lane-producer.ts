import type { InferJob } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { bandOf, ENTRY_FIELD, laneKeys, SYNC_GROUP } from "../shared/sync-lane.js";

/** A lane's groups by state: not yet read by a worker, and read but not yet answered. */
export interface LaneBacklog {
  waiting: number;
  active: number;
}

/**
 * The API's side of the sync lane: one XADD per coalesced group, whatever its size. Entries
 * are deleted once answered, so a stream's length is its backlog: waiting plus held.
 */
export class SyncLaneProducer {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Appends a group to its queue's lane at the band of `priority`; resolves with its id. */
  async send(queue: string, priority: number, group: InferJob): Promise<string> {
    const key = this.keys.syncLane(queue, bandOf(priority));
    const id = await this.redis.xadd(key, "*", ENTRY_FIELD, JSON.stringify(group));
    return id ?? "";
  }

  /** Groups waiting in every band of `queue`, and groups workers hold (read, not answered). */
  async backlog(queue: string): Promise<LaneBacklog> {
    const keys = laneKeys(this.keys, queue);
    const [lengths, pending] = await Promise.all([
      Promise.all(keys.map((key) => this.redis.xlen(key))),
      Promise.all(
        keys.map((key) =>
          (this.redis.xpending(key, SYNC_GROUP) as Promise<[number, ...unknown[]]>).then(
            (summary) => Number(summary[0] ?? 0),
            () => 0, // no group yet: no worker has read this lane, so nothing is held
          ),
        ),
      ),
    ]);
    let waiting = 0;
    let active = 0;
    lengths.forEach((length, band) => {
      const held = Math.min(length, pending[band] ?? 0);
      waiting += length - held;
      active += held;
    });
    return { waiting, active };
  }
}
