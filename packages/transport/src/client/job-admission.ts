import { BATCH_BAND, priorityBand } from "@ferry/protocol";
import type { OwnerShare } from "./owner-share.js";
import type { QueueDepth } from "./queue-depth.js";

/** What a job's admission reads of how it is queued (EnqueueOptions'). */
export interface AdmittedJob {
  priority: number;
  maxQueueSize: number;
  owner: string;
  /** Its owner is one tenant among several: held to its share of the queue. */
  shared?: boolean | undefined;
}

/**
 * Whether a job may be queued, or why not (QUEUE_FULL): the queue's depth against its limit
 * (the lowest band's share of it for batch lines), then its owner's share of the queue.
 */
export class JobAdmission {
  constructor(
    private readonly depth: QueueDepth,
    /** What holds one tenant's waiting jobs to a share of a queue, and that share (1: none). */
    private readonly owners?: { share: OwnerShare; of: number },
  ) {}

  /**
   * Admits job `id` to `queue`: from now it counts in the queue's depth. Returns its turn
   * within its priority (`bullPriority`): its owner's jobs already waiting there, or 0 for one
   * not held to a share.
   */
  async admit(queue: string, id: string, job: AdmittedJob): Promise<number> {
    return (await this.admitAll(queue, [id], job))[0] as number;
  }

  /**
   * As `admit`, for jobs `ids` together (a request's several choices): all of them, or none
   * and QUEUE_FULL. Returns their turns, one after another.
   */
  async admitAll(queue: string, ids: readonly string[], job: AdmittedJob): Promise<number[]> {
    const lowest = priorityBand(job.priority) === BATCH_BAND;
    await this.depth.admit(queue, job.maxQueueSize, true, lowest, ids.length);
    const owners = this.owners;
    if (!job.shared || !owners || owners.of >= 1) return ids.map(() => 0);
    try {
      return await owners.share.takeAll(queue, job.owner, ids, {
        maxQueueSize: job.maxQueueSize,
        share: owners.of,
        lowestShare: lowest ? this.depth.lowestBandShare : undefined,
        priority: job.priority,
      });
    } catch (err) {
      // not queued after all: they no longer count in the queue's depth
      this.depth.withdraw(queue, ids.length);
      throw err;
    }
  }
}
