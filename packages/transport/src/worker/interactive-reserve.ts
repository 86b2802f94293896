import { bullPriority } from "@ferry/protocol";
import { type Job, Worker } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { expireFinished } from "./finished-jobs.js";

/** How often a full worker looks for an interactive job at the head of its queue, in ms. */
const PEEK_MS = 4;
/** BullMQ's priority of the lowest interactive request: 4, the band above batches' 1-3. */
const LAST_INTERACTIVE = bullPriority(4);

export interface ReserveOptions {
  connection: RedisClient;
  prefix: string;
  /** Jobs it runs at once past the main worker's slots. */
  slots: number;
  lockDurationMs: number;
  /** Whether the main worker holds every slot it has (only then is the queue's head looked at). */
  full: () => boolean;
  /** Runs a job as the main worker's processor does; throws as it does. */
  process: (job: Job, token: string) => Promise<unknown>;
  jobTtlS: number;
}

/**
 * Slots for interactive completions past a generator's seats. BullMQ hands a free slot the
 * highest-priority job, but while offline batches' lines hold every slot an interactive job
 * waits in the queue until a line finishes. While the main worker is full this looks at the
 * head of the queue (one round trip every PEEK_MS) and takes a job waiting there above the
 * batch band with BullMQ's manual fetch, so the engine can seat it at once (it preempts a
 * batch line for it). A line fetched by a race runs here too: it waits in the engine.
 */
export class InteractiveReserve {
  private readonly worker: Worker;
  /** The jobs it runs now (closing waits for them, as BullMQ's own close does). */
  private readonly runs = new Set<Promise<void>>();
  private stopped = false;
  private tokens = 0;
  private readonly waitKey: string;
  private readonly prioritizedKey: string;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;

  constructor(
    queueName: string,
    private readonly options: ReserveOptions,
  ) {
    this.worker = new Worker(queueName, null, {
      connection: options.connection,
      prefix: options.prefix,
      lockDuration: options.lockDurationMs,
    });
    this.worker.on("error", () => {});
    expireFinished(this.worker, options.connection, options.jobTtlS);
    this.waitKey = `${options.prefix}:${queueName}:wait`;
    this.prioritizedKey = `${options.prefix}:${queueName}:prioritized`;
  }

  /** Looks again now: the main worker's slots changed. */
  changed(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  start(): void {
    void this.loop();
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.changed();
    await Promise.allSettled([...this.runs]);
    await this.worker.close();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      if (!this.options.full() || this.runs.size >= this.options.slots) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        continue;
      }
      const taken = await this.takeInteractive().catch(() => false);
      if (!taken)
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.timer = setTimeout(() => this.changed(), PEEK_MS);
        });
    }
  }

  /** Takes the head of the queue when an interactive job waits there; whether it took one. */
  private async takeInteractive(): Promise<boolean> {
    const [[, waiting], [, interactive]] = (await this.options.connection
      .pipeline()
      .llen(this.waitKey)
      // BullMQ scores a prioritized job priority * 2^32 + its order of arrival
      .zcount(this.prioritizedKey, "-inf", `(${(LAST_INTERACTIVE + 1) * 0x100000000}`)
      .exec()) as [[unknown, number], [unknown, number]];
    if (waiting === 0 && interactive === 0) return false;
    const token = `${this.worker.id}:reserve:${this.tokens++}`;
    const job = (await this.worker.getNextJob(token, { block: false })) as Job | undefined;
    if (!job) return false;
    const run: Promise<void> = this.run(job, token)
      .catch(() => undefined)
      .finally(() => {
        this.runs.delete(run);
        this.changed();
      });
    this.runs.add(run);
    return true;
  }

  /** What BullMQ's own loop does with a job: renews its lock, completes or fails it. */
  private async run(job: Job, token: string): Promise<void> {
    const lockMs = this.options.lockDurationMs;
    const renew = setInterval(() => void job.extendLock(token, lockMs).catch(() => {}), lockMs / 2);
    // a move Redis refuses (the lock lost, say) leaves the job to stall back to the queue
    try {
      const result = await this.options.process(job, token);
      await job.moveToCompleted(result, token, false);
      this.worker.emit("completed", job, result, "active");
    } catch (err) {
      // the processor moved the job itself (given back to the queue)
      if (err instanceof Error && /WaitingError|DelayedError/.test(err.name)) return;
      const error = err instanceof Error ? err : new Error(String(err));
      await job.moveToFailed(error, token, false).then(
        () => this.worker.emit("failed", job, error, "active"),
        () => undefined,
      );
    } finally {
      clearInterval(renew);
    }
  }
}
