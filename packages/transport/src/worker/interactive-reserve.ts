import { bullPriority, TURNS } from "@ferry/protocol";
import { type Job, Worker } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { expireFinished } from "./finished-jobs.js";

/**
 * How often a full worker looks for an interactive job at the head of its queue, in ms: what
 * the APIs' word (`queued`) missed (sent while this worker was not subscribed, or before the
 * job could be seen on a cluster) waits this long at most.
 */
const PEEK_MS = 25;
/** BullMQ's priority of the lowest interactive request: 4 (its last turn), above batches' 1-3. */
const LAST_INTERACTIVE = bullPriority(4, TURNS - 1);

export interface ReserveOptions {
  connection: RedisClient;
  prefix: string;
  /** Jobs it runs at once past the main worker's slots. */
  slots: number;
  lockDurationMs: number;
  /** How often it looks at the queue's head while the main worker is full. @defaultValue PEEK_MS */
  peekMs?: number;
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
 * batch line for it, or takes a seat batches leave free). An API's word that it queued an
 * interactive completion (`queued`) makes it look at once, so the look every PEEK_MS only
 * catches what that word missed. A line fetched by a race runs here too: it waits in the engine.
 */
export class InteractiveReserve {
  private readonly worker: Worker;
  /** The jobs it runs now (closing waits for them, as BullMQ's own close does). */
  private readonly runs = new Set<Promise<void>>();
  private stopped = false;
  /** An API said it queued an interactive completion since the last look. */
  private told = false;
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
    clearTimeout(this.timer);
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /**
   * An API says it just queued an interactive completion: the queue's head is looked at now,
   * not at the next look (every worker hears it; the look keeps the others from fetching the
   * batch line behind it).
   */
  queued(): void {
    this.told = true;
    this.changed();
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
        // a word heard now is for the main worker's free slots (or a full reserve's)
        this.told = false;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        continue;
      }
      this.told = false;
      const taken = await this.takeInteractive().catch(() => false);
      // a word heard while this look was under way: look again at once
      if (!taken && !this.told)
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.timer = setTimeout(() => this.changed(), this.options.peekMs ?? PEEK_MS);
        });
    }
  }

  /** Takes the head of the queue when an interactive job waits there; whether it took one. */
  private async takeInteractive(): Promise<boolean> {
    if (!(await this.interactiveWaits())) return false;
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

  private async interactiveWaits(): Promise<boolean> {
    const [[, waiting], [, interactive]] = (await this.options.connection
      .pipeline()
      .llen(this.waitKey)
      // BullMQ scores a prioritized job priority * 2^32 + its order of arrival
      .zcount(this.prioritizedKey, "-inf", `(${(LAST_INTERACTIVE + 1) * 0x100000000}`)
      .exec()) as [[unknown, number], [unknown, number]];
    return waiting > 0 || interactive > 0;
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
