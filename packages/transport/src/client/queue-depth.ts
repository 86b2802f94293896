import { FerryError } from "@ferry/protocol";
import type { QueueCounter } from "./queue-counts.js";

/** A job this process admitted, counted on top of the queue's sample until a count has it. */
export interface CountedJob {
  at: number;
  /** When its add was stored in Redis: a count asked for from then on has it. */
  landedAt?: number | undefined;
}

/** How jobs are admitted (`QueueDepth.admit`). */
export interface Admitting {
  /** Each becomes a job of its own, counted from now until a count of the queue has it. */
  counted?: boolean;
  /** Of the lowest priority band (batch lines): held to its share of the limit. */
  lowest?: boolean;
  /** Jobs admitted together (a request's several choices), all or none. @defaultValue 1 */
  jobs?: number;
}

interface Sample {
  waitingJobs: number;
  /** When the count was asked for: jobs admitted since may not be in it. */
  at: number;
  refreshing: Promise<void> | undefined;
  /** Jobs admitted that the sample may not have (they count on top of it). */
  admitted: CountedJob[];
}

/** How stale a sample of a queue's length may be before it is refreshed, in ms. */
const STALE_MS = 100;
/** How stale a sample may be and still refuse a job before its refresh is back, in ms. */
const UNTRUSTED_MS = 1_000;
/**
 * An admitted job whose add was never said to land or fail is counted this long at most, in
 * ms (a caller that lost track of it must not hold a place for ever).
 */
const LANDING_MS = 30_000;

/** Answered rows per queue, counted over windows of this length to measure its service rate. */
const RATE_WINDOW_MS = 1_000;
/** A rate not refreshed for this long says nothing of now (workers may have come or gone). */
const RATE_STALE_MS = 5_000;
/**
 * No row answered for this long while rows waited: the workers were gone (a restart loads its
 * models for seconds), not slow. The window that spans it measures nothing of their pace.
 */
const STALL_MS = 2 * RATE_WINDOW_MS;

interface ServiceRate {
  /**
   * Rows answered per second while rows kept waiting (the workers' pace, not the callers'),
   * smoothed over windows; 0 until such a window has closed.
   */
  perS: number;
  windowStart: number;
  count: number;
  /** When the last window closed. */
  at: number;
  /** When a row was last answered. */
  lastServed: number;
}

/** Refusing a sync row: what the caller is told, and when to try again. */
export interface Shedding {
  /** Longest a sync row may expect to wait in the queue, in ms (QUEUE_WAIT_BUDGET_MS). */
  waitBudgetMs: number;
  /**
   * The share of a queue's limit that jobs of the lowest band (batch lines) may fill
   * (BATCH_QUEUE_SHARE): the rest is left to interactive requests. @defaultValue 1
   */
  lowestBandShare?: number;
}

/**
 * Admission control for one API process: a queue's depth is its waiting jobs (sampled from
 * Redis, at most STALE_MS old) plus this process's rows not yet answered. Near the limit the
 * sample is refreshed before deciding, so bursts cannot overshoot by much.
 */
export class QueueDepth {
  private readonly samples = new Map<string, Sample>();
  private readonly outstanding = new Map<string, number>();
  private readonly rates = new Map<string, ServiceRate>();
  /** When this process last had no row of a queue outstanding: its workers had caught up. */
  private readonly caughtUpAt = new Map<string, number>();

  constructor(
    private readonly counter: QueueCounter,
    private readonly shedding: Shedding = { waitBudgetMs: Number.POSITIVE_INFINITY },
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Admits a sync row by the wait it can expect: the queue's depth over the rate this process
   * has seen it served at, against the row's time left and the wait budget. Refused (429)
   * before any Redis round trip: under overload the refusal itself must be cheap. No rate
   * known (a cold start, workers scaled to zero) never refuses: the row waits for a worker.
   */
  admitRow(name: string, limit: number, deadline: number): void {
    const sample = this.sample(name);
    const age = this.now() - sample.at;
    // a count of the queue older than UNTRUSTED_MS that nobody is reading again (the queue was
    // left alone since) says nothing of now: only this process's own rows count until it is
    // back (a sync row does not wait for it). Under load a read is always on its way, however
    // slow Redis answers, and the last count stands meanwhile
    const quiet = age > UNTRUSTED_MS && sample.refreshing === undefined;
    if (age > STALE_MS) void this.refresh(name, sample);
    const depth = quiet ? (this.outstanding.get(name) ?? 0) : this.depth(name, sample);
    if (depth >= limit) throw full(name, depth, limit, 1);
    const rate = this.rates.get(name);
    if (!rate || rate.perS <= 0 || this.now() - rate.at > RATE_STALE_MS) return;
    const expectedMs = (depth / rate.perS) * 1000;
    const allowedMs = Math.min(this.shedding.waitBudgetMs, deadline - this.now());
    if (expectedMs > allowedMs)
      throw FerryError.refusal(
        "QUEUE_FULL",
        `Queue for ${name} would take about ${Math.round(expectedMs)} ms to reach this request (${depth} ahead at ${Math.round(rate.perS)} rows/s); it can wait ${Math.max(0, Math.round(allowedMs))} ms`,
        { retryAfterS: Math.max(1, Math.ceil(expectedMs / 1000)) },
      );
  }

  /**
   * A row of `name` was answered: it feeds the queue's measured service rate. Only a window in
   * which rows never stopped waiting measures how fast the workers go; in one where they caught
   * up, rows were answered as fast as callers sent them, which says only that the workers go
   * at least that fast (two requests a second, then a burst of 800 on idle workers, was refused
   * by "26 ahead at 2 rows/s"): such a window can raise a fresh rate, never lower or make one.
   */
  served(name: string): void {
    const now = this.now();
    let rate = this.rates.get(name);
    if (!rate) {
      rate = { perS: 0, windowStart: now, count: 0, at: 0, lastServed: now };
      this.rates.set(name, rate);
    }
    // after a stall the window starts again here: a window that spanned a worker restart
    // measured "2 rows/s" of workers serving thousands, and refused the rows that had waited
    if (now - rate.lastServed > STALL_MS) {
      rate.windowStart = now;
      rate.count = 0;
    }
    rate.lastServed = now;
    rate.count++;
    const elapsed = now - rate.windowStart;
    if (elapsed < RATE_WINDOW_MS) return;
    const measured = (rate.count * 1000) / elapsed;
    const fresh = rate.perS > 0 && now - rate.at <= RATE_STALE_MS;
    const keptWaiting = (this.caughtUpAt.get(name) ?? Number.NEGATIVE_INFINITY) < rate.windowStart;
    if (keptWaiting) {
      // smooth, but let it move
      rate.perS = fresh ? (rate.perS + measured) / 2 : measured;
      rate.at = now;
    } else if (fresh && measured > rate.perS) {
      rate.perS = measured;
      rate.at = now;
    }
    rate.windowStart = now;
    rate.count = 0;
  }

  /**
   * Admits one request or refuses it with QUEUE_FULL. With `counted`, the request becomes a job of
   * its own: it counts from this moment until a sample of the queue includes it, so that a
   * burst within one sample's age cannot all be admitted against the same count. `lowest`
   * (batch lines) fills only `lowestBandShare` of the limit: batches that keep their lines
   * in flight (16 of 64 each) would otherwise fill the queue and leave interactive requests
   * nothing but 429s, though those run first once queued. `jobs`: that many jobs admitted
   * together (a request's several choices), all or none. Returns the jobs admitted: each is
   * counted until a count asked for once it `landed` has it, or until it is `withdraw`n.
   */
  async admit(name: string, queueLimit: number, how: Admitting = {}): Promise<CountedJob[]> {
    await this.fresh(name, queueLimit, how.lowest ?? false, how.jobs ?? 1);
    return this.admitNow(name, queueLimit, how);
  }

  /**
   * Whether `jobs` more jobs fit (as `admit`, counting nothing): what holds a job besides the
   * queue's depth (its key's share) is asked between this and `admitNow`, so that a job it
   * refuses never fills the depth meanwhile (one key's refused requests had held another
   * key's out of a queue with room).
   */
  async check(name: string, queueLimit: number, how: Admitting = {}): Promise<void> {
    const { lowest = false, jobs = 1 } = how;
    await this.fresh(name, queueLimit, lowest, jobs);
    this.refuseIfFull(name, queueLimit, lowest, jobs);
  }

  /** As `admit`, on the count this process has now (no Redis read waited for). */
  admitNow(name: string, queueLimit: number, how: Admitting = {}): CountedJob[] {
    const { counted = false, lowest = false, jobs = 1 } = how;
    this.refuseIfFull(name, queueLimit, lowest, jobs);
    if (!counted) return [];
    const at = this.now();
    const admitted = Array.from({ length: jobs }, (): CountedJob => ({ at }));
    this.sample(name).admitted.push(...admitted);
    return admitted;
  }

  /** The depth `lowest` jobs (batch lines) may fill: their share of the queue's limit. */
  private limitOf(queueLimit: number, lowest: boolean): number {
    return lowest
      ? Math.max(1, Math.floor(queueLimit * (this.shedding.lowestBandShare ?? 1)))
      : queueLimit;
  }

  /**
   * Refuses more jobs than the queue holds at all (INVALID_INPUT), and reads the queue's count
   * again where it is stale and near the limit.
   */
  private async fresh(name: string, queueLimit: number, lowest: boolean, jobs: number) {
    const limit = this.limitOf(queueLimit, lowest);
    if (jobs > limit)
      throw new FerryError(
        "INVALID_INPUT",
        `This request's ${jobs} choices are more than the queue for ${name} holds (${limit}); ask for fewer`,
      );
    const sample = this.sample(name);
    const age = this.now() - sample.at;
    if (age > STALE_MS) {
      // this call is the one to ask Redis again: no count was on its way
      const asks = sample.refreshing === undefined;
      const refresh = this.refresh(name, sample);
      const depth = this.depth(name, sample);
      // full already: refused at once while a count is on its way (under a flood one always
      // is, and the refusal must be cheap), else on the fresh count, one round trip away (a
      // queue left alone a moment had refused for jobs since gone: another key's request 0.3 s
      // after a full one's jobs ended). Only a queue near its limit waits too. A count older
      // than UNTRUSTED_MS (the queue was left alone since) says nothing of now: it is waited for
      const full = depth + jobs > limit;
      const near = !full && depth + jobs - 1 >= limit * 0.8;
      if (age > UNTRUSTED_MS || near || (full && asks)) await refresh;
    }
  }

  private refuseIfFull(name: string, queueLimit: number, lowest: boolean, jobs: number): void {
    const limit = this.limitOf(queueLimit, lowest);
    const depth = this.depth(name, this.sample(name));
    if (depth + jobs <= limit) return;
    throw lowest && limit < queueLimit
      ? FerryError.refusal(
          "QUEUE_FULL",
          `Queue for ${name} holds ${depth} waiting; priority 1-3 (batch lines among them) is queued only while fewer than ${limit} of its ${queueLimit} wait, the rest is kept for priority 4 and up${jobs > 1 ? ` (this request has ${jobs} choices)` : ""}`,
          { retryAfterS: 1 },
        )
      : full(name, depth, limit, 1, jobs);
  }

  /** Jobs admitted (`admit` with `counted`) are stored in their queue: a count from now has them. */
  landed(jobs: readonly CountedJob[]): void {
    const now = this.now();
    for (const job of jobs) job.landedAt ??= now;
  }

  /** The share of a limit the lowest band may fill (Shedding's lowestBandShare). */
  get lowestBandShare(): number {
    return this.shedding.lowestBandShare ?? 1;
  }

  /**
   * Jobs admitted (`admit` with `counted`) were not queued after all (refused by what else holds
   * them, or their add failed): they no longer count. Those very jobs, not the last admitted:
   * a count read since may have dropped them already, and another's job, admitted after that
   * count and not in it, would be dropped in their place.
   */
  withdraw(name: string, jobs: readonly CountedJob[]): void {
    const sample = this.sample(name);
    const gone = new Set(jobs);
    sample.admitted = sample.admitted.filter((job) => !gone.has(job));
  }

  /** A queue's work by state, read from Redis (for dashboards, not admission). */
  counts(name: string): Promise<Record<string, number>> {
    return this.counter.counts(name);
  }

  /** Work waiting in a queue now (async jobs and sync groups), read from Redis. */
  waiting(name: string): Promise<number> {
    return this.counter.waiting(name);
  }

  /** Queues this process has admitted work to. */
  queues(): string[] {
    return [...this.samples.keys()];
  }

  /**
   * As `waiting`, from admission's own sample while it is under a second old: a queue with
   * traffic is sampled many times a second already.
   */
  async waitingNow(name: string): Promise<number> {
    const sample = this.samples.get(name);
    if (sample && sample.at > 0 && this.now() - sample.at < 1_000) return sample.waitingJobs;
    return this.counter.waiting(name);
  }

  enter(name: string): void {
    this.outstanding.set(name, (this.outstanding.get(name) ?? 0) + 1);
  }

  leave(name: string): void {
    const left = (this.outstanding.get(name) ?? 1) - 1;
    this.outstanding.set(name, left);
    if (left <= 0) this.caughtUpAt.set(name, this.now());
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
    const askedAt = this.now();
    sample.refreshing ??= this.counter
      .waiting(name)
      .then((waiting) => {
        sample.waitingJobs = waiting;
        sample.at = askedAt;
        // those stored before the count was asked for are in it now (or already taken); one
        // admitted before it but stored after is in neither, and had been dropped: a burst of
        // another key's requests was then admitted past the queue's limit
        sample.admitted = sample.admitted.filter((job) =>
          job.landedAt === undefined ? askedAt - job.at < LANDING_MS : job.landedAt >= askedAt,
        );
      })
      .catch(() => undefined)
      .finally(() => {
        sample.refreshing = undefined;
      });
    return sample.refreshing;
  }
}

function full(
  name: string,
  depth: number,
  limit: number,
  retryAfterS: number,
  jobs = 1,
): FerryError {
  return FerryError.refusal(
    "QUEUE_FULL",
    jobs > 1
      ? `Queue for ${name} has no room for this request's ${jobs} choices (${depth} waiting, limit ${limit})`
      : `Queue for ${name} is full (${depth} waiting, limit ${limit})`,
    {
      retryAfterS,
    },
  );
}
