// The sync lane: how the API hands coalesced row groups of sync requests to the workers. A
// group is one entry of a Redis Stream per queue and priority band; workers read it through
// one consumer group, acknowledge and delete it once answered, and claim the entries of a
// worker that died. BullMQ keeps the async jobs and batch chunks, whose per-job state (retries,
// polling, events) is worth its cost; a sync row needs none of it, and BullMQ's several dozen
// Redis commands a job became the serving path's ceiling.
import { priorityBand } from "@ferry/protocol";
import type { Keys } from "./keys.js";

/** The consumer group every worker reads a lane with. */
export const SYNC_GROUP = "workers";

/** Priority bands of the sync lane, highest first: 8-10, 4-7, 1-3. */
export const SYNC_BANDS = 3;

/** The band of a request priority (1 lowest .. 10 highest); 0 is read first. */
export const bandOf = priorityBand;

/** A queue's lane streams, highest band first (the order a worker reads them in). */
export function laneKeys(keys: Keys, queue: string): string[] {
  return Array.from({ length: SYNC_BANDS }, (_, band) => keys.syncLane(queue, band));
}

/** The stream field an entry's group (an InferJob, JSON) is stored under. */
export const ENTRY_FIELD = "d";
