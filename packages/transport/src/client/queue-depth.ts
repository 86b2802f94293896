import { FerryError } from "@ferry/protocol";
import type { Queue } from "bullmq";

interface Sample {
  waitingJobs: number;
  /** When the count was asked for: jobs admitted since may not be in it. */
  at: number;
  refreshing: Promise<void> | undefined;
  /** When each job admitted since `at` was admitted (they count on top of the sample). */
  admitted: number[];
}

/** How stale a sample of a queue's length may be before it is refreshed, in ms. */
const STALE_MS = 100;

/**
 * Admission control for one API process: a queue's depth is its waiting jobs (sampled from
 * Redis, at most STALE_MS old) plus this process's rows not yet answered. Near the limit the
 * sample is refreshed before deciding, so bursts cannot overshoot by much.
 */
export class QueueDepth {
  private readonly samples = new Map<string, Sample>();
  private readonly outstanding = new Map<string, number>();

  constructor(private readonly queue: (name: string) => Queue) {}

  /**
   * Admits one request or refuses it with QUEUE_FULL. With `job`, the request becomes a job of
   * its own: it counts from this moment until a sample of the queue includes it, so that a
   * burst within one sample's age cannot all be admitted against the same count.
   */
  async admit(name: string, limit: number, job = false): Promise<void> {
    const sample = this.sample(name);
    const stale = Date.now() - sample.at > STALE_MS;
    if (stale) {
      const refresh = this.refresh(name, sample);
      if (this.depth(name, sample) >= limit * 0.8) await refresh;
    }
    const depth = this.depth(name, sample);
    if (depth >= limit) {
      throw new FerryError(
        "QUEUE_FULL",
        `Queue for ${name} is full (${depth} waiting, limit ${limit})`,
        {
          retryAfterS: 1,
        },
      );
    }
    if (job) sample.admitted.push(Date.now());
  }

  /** A queue's jobs by state, read from Redis (for dashboards, not admission). */
  async counts(name: string): Promise<Record<string, number>> {
    const counts = await this.queue(name).getJobCounts(
      "wait",
      "prioritized",
      "active",
      "completed",
      "failed",
    );
    return {
      waiting: (counts.wait ?? 0) + (counts.prioritized ?? 0),
      active: counts.active ?? 0,
      completed: counts.completed ?? 0,
      failed: counts.failed ?? 0,
    };
  }

  /** Jobs waiting in a queue now (waiting and prioritized), read from Redis. */
  async waiting(name: string): Promise<number> {
    const counts = await this.queue(name).getJobCounts("wait", "prioritized");
    return (counts.wait ?? 0) + (counts.prioritized ?? 0);
  }

  enter(name: string): void {
    this.outstanding.set(name, (this.outstanding.get(name) ?? 0) + 1);
  }

  leave(name: string): void {
    this.outstanding.set(name, (this.outstanding.get(name) ?? 1) - 1);
  }

  private depth(name: string, sample: Sample): number {
    return sample.waitingJobs + sample.admitted.length + (this.outstanding.get(name) ?? 0);
  }

  private sample(name: string): Sample {
    let sample = this.samples.get(name);
    if (!sample) {
      sample = { waitingJobs: 0, at: 0, refreshing: undefined, admitted: [] };
      this.samples.set(name, sample);
    }
    return sample;
  }

  private refresh(name: string, sample: Sample): Promise<void> {
    const askedAt = Date.now();
    sample.refreshing ??= this.queue(name)
      .getJobCounts("wait", "prioritized")
      .then((counts) => {
        sample.waitingJobs = (counts.wait ?? 0) + (counts.prioritized ?? 0);
        sample.at = askedAt;
        // those admitted before the count was asked for are in it now (or already taken)
        sample.admitted = sample.admitted.filter((t) => t >= askedAt);
      })
      .catch(() => undefined)
      .finally(() => {
        sample.refreshing = undefined;
      });
    return sample.refreshing;
  }
}
