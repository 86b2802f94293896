import { FerryError } from "@ferry/protocol";
import { type Clock, systemClock } from "./clock.js";

/**
 * TEI's `max_batch_tokens`, for rows of varying length padded to their batch's longest: a
 * batch is full once one more row would take its padded tokens (rows times the longest row)
 * past `maxBatchTokens`, whatever its row count. A row over the budget alone runs alone.
 */
export interface TokenBudget<I> {
  maxBatchTokens: number;
  tokensOf: (input: I) => number;
}

export interface BatcherOptions<I = unknown> {
  /** Rows in one batch at most. */
  maxBatchSize: number;
  /** Sizes that dispatch at once, without waiting for the queue delay (Triton's preferred_batch_size). */
  preferredBatchSizes: readonly number[];
  /** How long the oldest waiting row may wait for others, in ms. */
  maxQueueDelayMs: number;
  /** Batches that run at once: one per model instance. @defaultValue 1 */
  concurrency?: number;
  /** Closes batches by padded tokens too (an embedder's); rows only without it. */
  tokenBudget?: TokenBudget<I>;
}

/** Runs one batch; returns one output per input, in order. */
export type BatchExecutor<I, O> = (inputs: I[]) => Promise<O[]>;

export interface BatchOutcome<O> {
  output: O;
  /** Time from submit to dispatch, in ms. */
  queueMs: number;
  /** Time the batch took to execute, in ms. */
  computeMs: number;
  batchSize: number;
}

interface Item<I, O> {
  input: I;
  enqueuedAt: number;
  deadline: number;
  signal: AbortSignal | undefined;
  resolve: (outcome: BatchOutcome<O>) => void;
  reject: (err: FerryError) => void;
}

/**
 * Triton's dynamic batcher: rows wait until a batch is full, a preferred size is reached, or
 * the oldest has waited `maxQueueDelayMs`, and a batch only forms when an instance is free to
 * run it — so a busy model gathers larger batches instead of queueing small ones. Rows whose
 * deadline passed or whose caller cancelled leave before compute is spent on them. When a
 * batch fails, its rows are retried one by one so that one bad row fails alone.
 *
 * @example
 * const batcher = new Batcher(async (rows) => rows.map((r) => r * 2), { maxBatchSize: 32, preferredBatchSizes: [], maxQueueDelayMs: 2 });
 * const { output } = await batcher.submit(21, Date.now() + 1_000); // 42
 */
export class Batcher<I, O> {
  private readonly queue: Item<I, O>[] = [];
  /** Batches formed elsewhere (an offline chunk's), waiting for an instance live rows leave. */
  private readonly whole: Array<() => Promise<void>> = [];
  private running = 0;
  private timer: unknown;
  private timerAt = Number.POSITIVE_INFINITY;
  private readonly concurrency: number;
  private readonly preferred: number[];
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly execute: BatchExecutor<I, O>,
    private readonly options: BatcherOptions<I>,
    private readonly clock: Clock = systemClock,
  ) {
    this.concurrency = options.concurrency ?? 1;
    this.preferred = [...options.preferredBatchSizes]
      .filter((s) => s <= options.maxBatchSize)
      .sort((a, b) => b - a);
  }

  /** Rows waiting for a batch. */
  get pending(): number {
    return this.queue.length;
  }

  /** Batches executing now. */
  get inFlight(): number {
    return this.running;
  }

  submit(input: I, deadline: number, signal?: AbortSignal): Promise<BatchOutcome<O>> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, enqueuedAt: this.clock.now(), deadline, signal, resolve, reject });
      this.dispatch();
    });
  }

  /**
   * Runs `work` (a batch formed elsewhere: an offline chunk's rows, already packed) on the
   * next instance free of live rows: rows queued here go first whenever they can form a
   * batch, so an offline batch only fills the time live traffic leaves. Whole batches run in
   * the order they came.
   */
  runWhole<R>(work: () => Promise<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      // a work that throws at once rejects its caller, as one that fails later does
      this.whole.push(() => Promise.resolve().then(work).then(resolve, reject));
      this.dispatch();
    });
  }

  /** Resolves when nothing waits and nothing runs. */
  idle(): Promise<void> {
    if (this.queue.length === 0 && this.whole.length === 0 && this.running === 0)
      return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private dispatch(): void {
    while (this.running < this.concurrency && this.queue.length > 0) {
      // the oldest row that can still run sets the delay
      while (this.queue[0] && this.dropIfDead(this.queue[0], this.clock.now())) this.queue.shift();
      if (this.queue.length === 0) break;
      const take = this.batchSizeNow();
      if (take === 0) {
        const oldest = this.queue[0];
        if (oldest) this.armTimer(oldest.enqueuedAt + this.options.maxQueueDelayMs);
        break;
      }
      const batch = this.takeLive(take);
      if (batch.length > 0) void this.run(batch);
    }
    if (this.queue.length === 0) this.disarmTimer();
    // an instance live rows leave (none waiting, or waiting for more to join them) runs a
    // whole batch meanwhile
    while (this.running < this.concurrency && this.whole.length > 0) {
      const work = this.whole.shift() as () => Promise<void>;
      this.running++;
      void work().finally(() => this.ended());
    }
  }

  /** An instance is free again: the next batch, or the idle waiters. */
  private ended(): void {
    this.running--;
    this.dispatch();
    if (this.queue.length === 0 && this.whole.length === 0 && this.running === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /**
   * Up to `n` rows from the front of the queue, within the token budget; rows whose deadline
   * passed or whose caller cancelled leave on the way, unrun. Rows are looked at only as they
   * are taken: a check of the whole queue at every submit made a deep queue (a batch job's
   * thousands of rows) quadratic.
   */
  private takeLive(n: number): Item<I, O>[] {
    const now = this.clock.now();
    const batch: Item<I, O>[] = [];
    const padded = this.paddedTokens();
    let k = 0;
    while (batch.length < n && k < this.queue.length) {
      const item = this.queue[k] as Item<I, O>;
      if (this.dropIfDead(item, now)) {
        k++;
        continue;
      }
      if (padded && batch.length > 0 && !padded.fits(item.input)) break;
      padded?.add(item.input);
      batch.push(item);
      k++;
    }
    this.queue.splice(0, k);
    return batch;
  }

  /** A batch's padded tokens as rows join it, when the batcher has a token budget. */
  private paddedTokens(): { fits(input: I): boolean; add(input: I): void } | undefined {
    const budget = this.options.tokenBudget;
    if (!budget) return undefined;
    let rows = 0;
    let longest = 0;
    return {
      fits: (input) =>
        (rows + 1) * Math.max(longest, budget.tokensOf(input)) <= budget.maxBatchTokens,
      add: (input) => {
        rows++;
        longest = Math.max(longest, budget.tokensOf(input));
      },
    };
  }

  /**
   * Rows from the front that one batch can hold: `maxBatchSize`, or fewer where the token
   * budget closes the batch first (at least one: a row over the budget runs alone).
   */
  private batchCapacity(): number {
    const max = this.options.maxBatchSize;
    const padded = this.paddedTokens();
    if (!padded) return max;
    let k = 0;
    for (const item of this.queue) {
      if (k >= max || (k > 0 && !padded.fits(item.input))) break;
      padded.add(item.input);
      k++;
    }
    // every row queued fits: the batch is as full as the row count says
    return k === this.queue.length ? max : k;
  }

  /** How many rows to dispatch now; 0 means wait for more rows or for the delay. */
  private batchSizeNow(): number {
    const n = this.queue.length;
    const max = this.batchCapacity();
    if (n >= max) return max;
    const preferred = this.preferred.find((size) => size <= n);
    if (preferred !== undefined) return preferred;
    const oldest = this.queue[0];
    if (oldest && this.clock.now() - oldest.enqueuedAt >= this.options.maxQueueDelayMs) return n;
    return 0;
  }

  private async run(items: Item<I, O>[]): Promise<void> {
    this.running++;
    const started = this.clock.now();
    try {
      const outputs = await this.execute(items.map((i) => i.input));
      const computeMs = this.clock.now() - started;
      items.forEach((item, k) => {
        item.resolve({
          output: outputs[k] as O,
          queueMs: started - item.enqueuedAt,
          computeMs,
          batchSize: items.length,
        });
      });
    } catch (err) {
      await this.isolate(items, started, err);
    } finally {
      this.ended();
    }
  }

  /** A failed batch: run each row alone, so that only the rows that fail by themselves fail. */
  private async isolate(items: Item<I, O>[], started: number, batchError: unknown): Promise<void> {
    if (items.length === 1) {
      items[0]?.reject(modelError(batchError));
      return;
    }
    for (const item of items) {
      const t0 = this.clock.now();
      try {
        const [output] = await this.execute([item.input]);
        item.resolve({
          output: output as O,
          queueMs: started - item.enqueuedAt,
          computeMs: this.clock.now() - t0,
          batchSize: 1,
        });
      } catch (err) {
        item.reject(modelError(err));
      }
    }
  }

  /** Rejects a row that must not run (cancelled, or past its deadline); true if it did. */
  private dropIfDead(item: Item<I, O>, now: number): boolean {
    if (item.signal?.aborted) {
      item.reject(new FerryError("CANCELLED", "request was cancelled before it ran"));
      return true;
    }
    if (item.deadline <= now) {
      item.reject(
        new FerryError("DEADLINE_EXCEEDED", "deadline passed while queued; not computed"),
      );
      return true;
    }
    return false;
  }

  private armTimer(at: number): void {
    if (this.timer !== undefined && at >= this.timerAt) return;
    this.disarmTimer();
    this.timerAt = at;
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.dispatch();
      },
      Math.max(0, at - this.clock.now()),
    );
  }

  private disarmTimer(): void {
    if (this.timer === undefined) return;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }
}

function modelError(err: unknown): FerryError {
  if (err instanceof FerryError) return err;
  return new FerryError("MODEL_ERROR", err instanceof Error ? err.message : String(err));
}
