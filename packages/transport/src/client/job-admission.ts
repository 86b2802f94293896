import { BATCH_BAND, priorityBand } from "@ferry/protocol";
import type { OwnerShare } from "./owner-share.js";
import type { CountedJob, QueueDepth } from "./queue-depth.js";

/** What a job's admission reads of how it is queued (EnqueueOptions'). */
export interface AdmittedJob {
  priority: number;
  maxQueueSize: number;
  owner: string;
  /** Its owner is one tenant among several: held to its share of the queue. */
  shared?: boolean | undefined;
}

/**
 * A job's place, admitted: its turn, and what its add did (counted in the queue's depth until
 * a count has it, or given back).
 */
export interface AdmittedPlace {
  turn: number;
  /** Its add was stored: the queue's count from now on has it. */
  landed(): void;
  /** It was not queued after all (its add failed): its place is given back, if not stored. */
  withdraw(): void;
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
   * Admits job `id` to `queue`: from now it counts in the queue's depth. Its turn is within
   * its priority (`bullPriority`): its owner's jobs already waiting there, or 0 for one not
   * held to a share.
   */
  async admit(queue: string, id: string, job: AdmittedJob): Promise<AdmittedPlace> {
    return (await this.admitAll(queue, [id], job))[0] as AdmittedPlace;
  }

  /**
   * As `admit`, for jobs `ids` together (a request's several choices): all of them, or none
   * and QUEUE_FULL. Their turns come one after another.
   */
  async admitAll(
    queue: string,
    ids: readonly string[],
    job: AdmittedJob,
  ): Promise<AdmittedPlace[]> {
    const lowest = priorityBand(job.priority) === BATCH_BAND;
    const how = { counted: true, lowest, jobs: ids.length };
    const owners = this.owners;
    if (!job.shared || !owners || owners.of >= 1) {
      const counted = await this.depth.admit(queue, job.maxQueueSize, how);
      return counted.map((one) => this.place(queue, one, 0));
    }
    // the queue's depth is checked first and taken last: a request its key's share refuses
    // never counts in it (one key's refused requests had kept another key's out of a queue
    // with room, the depth holding their places until the share's answer came back)
    await this.depth.check(queue, job.maxQueueSize, how);
    const turns = await owners.share.takeAll(queue, job.owner, ids, {
      maxQueueSize: job.maxQueueSize,
      share: owners.of,
      lowestShare: lowest ? this.depth.lowestBandShare : undefined,
      priority: job.priority,
    });
    let counted: CountedJob[];
    try {
      counted = this.depth.admitNow(queue, job.maxQueueSize, how);
    } catch (err) {
      // the queue filled meanwhile: not queued after all, their places in the share go back
      await owners.share.release(queue, job.owner, ids, lowest).catch(() => undefined);
      throw err;
    }
    return counted.map((one, k) => this.place(queue, one, turns[k] ?? 0));
  }

  private place(queue: string, counted: CountedJob, turn: number): AdmittedPlace {
    return {
      turn,
      landed: () => this.depth.landed([counted]),
      // stored already (its add landed, a later write failed): a count has it, or soon will
      withdraw: () => {
        if (counted.landedAt === undefined) this.depth.withdraw(queue, [counted]);
      },
    };
  }
}
