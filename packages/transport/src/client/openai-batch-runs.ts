import { DelayedError, WaitingError, Worker } from "bullmq";
import { createRedis, type RedisClient, type RedisTarget } from "../shared/connection.js";
import { BATCH_RUNS_QUEUE, bullQueueName, type Keys } from "../shared/keys.js";

/** How many times a batch's run is tried (its runner failing, not its lines) before it fails. */
export const RUN_ATTEMPTS = 10;

/** Where batches run: how many at once per API process, and how a dead runner's are found. */
export interface BatchRunnerOptions {
  concurrency: number;
  /** A runner's lock on its batch; a dead runner's batch is taken over once it lapses. */
  lockDurationMs: number;
  stalledIntervalMs: number;
}

/**
 * What a run throws to be taken up again later, not now (its tenant already runs as many
 * batches as it may): the batch waits `delayMs` in the queue, and no attempt is spent.
 */
export class PostponedRun extends Error {
  constructor(readonly delayMs: number) {
    super(`postponed ${delayMs} ms`);
    this.name = "PostponedRun";
  }
}

/** Runs one batch to its end; `signal` aborts when this process hands its batches back. */
export type BatchRun = (id: string, signal: AbortSignal) => Promise<void>;

/**
 * The runs of OpenAI-shaped batches: a BullMQ job per batch on one queue (queued with the
 * batch, `OpenAiBatchStore.create`) and a BullMQ worker on it in every API process, so that a
 * batch outlives the replica that created it: when a runner dies its lock lapses and another
 * takes the batch over, skipping the lines already answered.
 */
export class OpenAiBatchRuns {
  private worker: Worker | undefined;
  private workerConnection: RedisClient | undefined;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly keys: Keys,
    /** The deployment's Redis, for the runner's own (blocking) connection. */
    private readonly target: RedisTarget,
  ) {}

  /**
   * Runs batches on this process as they come, `run` each, beside every other replica's
   * runner; a batch this process stops holding (`close`) goes back to the queue at once.
   */
  process(
    run: BatchRun,
    options: BatchRunnerOptions,
    onFailure: (id: string, err: unknown) => Promise<void>,
  ): void {
    const connection = createRedis(this.target);
    connection.on("error", () => {});
    this.workerConnection = connection;
    this.worker = new Worker<{ batch: string }>(
      bullQueueName(BATCH_RUNS_QUEUE),
      async (job, token, signal) => {
        const stop = signal ?? new AbortController().signal;
        try {
          await run(job.data.batch, stop);
        } catch (err) {
          if (err instanceof PostponedRun && token !== undefined) {
            // one that cannot be moved (its lock lost, Redis away) stalls back to the queue
            // once its lock lapses: no attempt is spent either way
            await job.moveToDelayed(Date.now() + err.delayMs, token).catch(() => undefined);
            throw new DelayedError();
          }
          if (stop.aborted && token !== undefined) {
            // handed back: another runner (or this one, restarted) takes it from its answers
            await job.moveToWait(token).catch(() => undefined);
            throw new WaitingError();
          }
          if (job.attemptsMade + 1 >= RUN_ATTEMPTS)
            await onFailure(job.data.batch, err).catch(() => undefined);
          throw err;
        }
      },
      {
        connection,
        prefix: this.keys.prefix,
        concurrency: options.concurrency,
        lockDuration: options.lockDurationMs,
        stalledInterval: options.stalledIntervalMs,
        // a runner that dies hands its batch on; its lines are never answered twice
        maxStalledCount: 100,
      },
    );
    this.worker.on("error", () => {});
  }

  /**
   * Stops running batches here (at once, and once however often it is called): those running
   * go back to the queue for another runner.
   */
  close(): Promise<void> {
    this.closing ??= this.stop();
    return this.closing;
  }

  private async stop(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    worker.cancelAllJobs("this API process is stopping");
    await worker.close().catch(() => undefined);
    this.workerConnection?.disconnect();
  }
}
