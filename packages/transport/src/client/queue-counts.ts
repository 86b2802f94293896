import type { Queue } from "bullmq";
import type { SyncLaneProducer } from "./sync-lane-producer.js";

/** What a queue's length is read from. */
export interface QueueCounter {
  /** Work waiting for a worker: async jobs and batch chunks, and sync groups. */
  waiting(name: string): Promise<number>;
  /** By state, for dashboards: waiting, active, completed, failed. */
  counts(name: string): Promise<Record<string, number>>;
}

/**
 * A model-version queue is two things in Redis: its BullMQ queue (async jobs, batch chunks)
 * and its sync lane (coalesced groups of sync rows). Their lengths add up here.
 */
export class QueueCounts implements QueueCounter {
  constructor(
    private readonly queue: (name: string) => Queue,
    private readonly lane: SyncLaneProducer,
  ) {}

  async waiting(name: string): Promise<number> {
    const [counts, lane] = await Promise.all([
      this.queue(name).getJobCounts("wait", "prioritized"),
      this.lane.backlog(name),
    ]);
    return (counts.wait ?? 0) + (counts.prioritized ?? 0) + lane.waiting;
  }

  async counts(name: string): Promise<Record<string, number>> {
    const [counts, lane] = await Promise.all([
      this.queue(name).getJobCounts("wait", "prioritized", "active", "completed", "failed"),
      this.lane.backlog(name),
    ]);
    return {
      waiting: (counts.wait ?? 0) + (counts.prioritized ?? 0) + lane.waiting,
      active: (counts.active ?? 0) + lane.active,
      // answered sync groups leave no trace in Redis: these count async jobs and batch chunks
      completed: counts.completed ?? 0,
      failed: counts.failed ?? 0,
    };
  }
}
