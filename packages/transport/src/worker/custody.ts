import type { Job } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import { type Keys, queueOfBullName } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { HEARTBEAT_INTERVAL_MS, type WorkerRegistry } from "../shared/worker-registry.js";

/** The error a job gets when it was running alone on a worker that died or stalled. */
export const CRASHED_WORKER = "this request crashed the worker that ran it; it is not tried again";

/** Deletes a custody record only if it is still this run's. KEYS: custody. ARGV: run. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** What a worker does with a job, told by the record of its run before. */
type Verdict = "run" | "solo" | "culprit";

/** Deaths of its workers a job may have caused before it is failed as their cause. */
const MAX_STRIKES = 2;

/**
 * Keeps one job from crashing worker after worker. Before a job's work starts, Redis records
 * which worker runs it (`custody`) and, per worker, every job its work is running on
 * (`holding`); both are removed when the work ends, so a job that comes back with its record
 * still there was on a worker that died (or stalled past its lock) during its run:
 * - it was alone there (the worker's record holds it only) and had not got past taking its
 *   input in (a generation had logged no token): it is the cause, and fails with
 *   CRASHED_WORKER rather than going on to the next worker;
 * - it was one of several: any of them may be the cause, so each runs again alone on its
 *   worker (`solo`: the worker takes no other job meanwhile), its record counting the strike;
 * - it was alone but well into its work (a stream decoding when its host lost power): it may
 *   be innocent, and runs again beside others, its record counting the strike.
 * One that comes back from a second death is failed. Innocent jobs are answered once.
 * A poison job so crashes workers once when it kills its worker as its input is taken in
 * alone, twice at most otherwise (with others, or later in its work). A job whose worker
 * still beats (it lost the job's lock to a Redis outage, say) was not its cause, and runs
 * again as before; one whose worker's drain timed out reads as a death. Rows of the sync
 * lane are not recorded (a record per row would cost the lane its round trips); a group of
 * them whose workers keep dying is answered with an error after `maxDeliveries`.
 */
export class Custody {
  /** Jobs whose work runs in this process now. */
  private readonly running = new Set<string>();
  /** The solo run now, and the ones waiting for it; jobs waiting for a solo to end. */
  private soloChain: Promise<void> = Promise.resolve();
  private solos = 0;
  private changed: Array<() => void> = [];
  private readonly release: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    /** This worker: its id, and when this process of it started (its heartbeat's started_at). */
    private readonly self: { id: string; startedAt: number },
    private readonly registry: WorkerRegistry,
    /** How long a record outlives a worker that never removed it, in s. */
    private readonly ttlS: number,
    /** Stops and restarts this worker's taking of jobs, around a solo run. */
    private readonly intake: { pause: () => Promise<void>; resume: () => void },
  ) {
    this.release = new LuaCommand(redis, "ferryReleaseCustody", 1, RELEASE);
  }

  /**
   * Runs `work` for `job` under custody, or, for a job that crashed its worker, calls
   * `refuse` with the error to fail it with (no retry). `progressed` says whether a run of
   * the job that a worker's death cut short had got past taking its input in (asked only
   * then); a job without one never has.
   */
  async run<T>(
    job: Job,
    work: () => Promise<T>,
    refuse: (message: string) => Promise<never>,
    progressed?: () => Promise<boolean>,
  ) {
    const ref = { queue: queueOfBullName(job.queueName), id: job.id ?? "" };
    const member = `${ref.queue} ${ref.id}`;
    const custody = this.keys.custody(ref);
    const { verdict, strikes } = await this.verdict(job, custody, member, progressed);
    if (verdict === "culprit") {
      await this.redis.del(custody).catch(() => undefined);
      return refuse(CRASHED_WORKER);
    }
    const leave = verdict === "solo" ? await this.enterSolo() : await this.afterSolos();
    // on record before the work starts: a crash in its first instruction still finds it
    const run = `${this.self.id} ${job.id ?? ""} ${Date.now()} ${strikes} ${this.self.startedAt}`;
    await Promise.all([
      this.redis.set(custody, run, "EX", this.ttlS),
      this.redis
        .multi()
        .sadd(this.keys.holding(this.self.id), member)
        .expire(this.keys.holding(this.self.id), this.ttlS)
        .exec(),
    ]).catch(() => undefined);
    this.running.add(member);
    try {
      return await work();
    } finally {
      this.running.delete(member);
      this.notify();
      await Promise.all([
        this.release.run(this.redis, custody, run),
        this.redis.srem(this.keys.holding(this.self.id), member),
      ]).catch(() => undefined);
      leave();
    }
  }

  private async verdict(
    job: Job,
    custody: string,
    member: string,
    progressed: (() => Promise<boolean>) | undefined,
  ): Promise<{ verdict: Verdict; strikes: number }> {
    // a job never started before has no record to read: no round trip for it
    if (job.attemptsStarted <= 1 && job.stalledCounter === 0) return { verdict: "run", strikes: 0 };
    const record = await this.redis.get(custody).catch(() => null);
    if (record === null)
      return job.stalledCounter > 0
        ? { verdict: "solo", strikes: 1 }
        : { verdict: "run", strikes: 0 };
    const [holder = "", , , counted, started] = record.split(" ");
    const before = Number(counted) || 0;
    if (await this.beating(holder, started === undefined ? undefined : Number(started)))
      return { verdict: "run", strikes: before };
    const strikes = before + 1;
    if (strikes >= MAX_STRIKES) return { verdict: "culprit", strikes };
    const held = await this.redis.smembers(this.keys.holding(holder)).catch(() => []);
    const alone = held.length === 1 && held[0] === member;
    if (!alone) return { verdict: "solo", strikes };
    // alone, yet well into its work when the worker died: a kill from outside (a host's power,
    // the OOM killer for the whole pod) is as likely a cause as the job, so one more run
    // decides; it need not be alone (its strike fails it at a second death, wherever it runs),
    // and a look that fails gives the job the benefit of the doubt
    if (progressed && (await progressed().catch(() => true))) return { verdict: "run", strikes };
    return { verdict: "culprit", strikes };
  }

  /**
   * Whether `worker`'s process that ran the job (the one started at `startedAt`, where the
   * record says) is alive and answering: its heartbeat moves within one and a half of its
   * intervals (a busy worker's beat may come late). One that died, or whose event loop a job
   * blocks, beats no more; one that died and came back under the same id (a container
   * restarted in its pod) beats with another start.
   */
  private async beating(worker: string, startedAt: number | undefined): Promise<boolean> {
    const same = (start: number) => startedAt === undefined || start === startedAt;
    if (worker === this.self.id) return same(this.self.startedAt);
    const first = await this.registry.entry(worker).catch(() => undefined);
    if (first === undefined || !same(first.started_at)) return false;
    await sleep(HEARTBEAT_INTERVAL_MS * 1.5);
    const again = await this.registry.entry(worker).catch(() => undefined);
    return again !== undefined && same(again.started_at) && again.expires_at > first.expires_at;
  }

  /** Waits for every other job here to end, with no new one taken; returns its release. */
  private async enterSolo(): Promise<() => void> {
    this.solos++;
    let done: () => void = () => {};
    const previous = this.soloChain;
    this.soloChain = new Promise<void>((resolve) => {
      done = resolve;
    });
    await previous;
    await this.intake.pause().catch(() => undefined);
    while (this.running.size > 0) await new Promise<void>((r) => this.changed.push(r));
    return () => {
      this.solos--;
      done();
      if (this.solos === 0) this.intake.resume();
      this.notify();
    };
  }

  /** A job taken before a solo began waits for it (and for those queued after it) to end. */
  private async afterSolos(): Promise<() => void> {
    while (this.solos > 0) await new Promise<void>((r) => this.changed.push(r));
    return () => {};
  }

  private notify(): void {
    const waiting = this.changed;
    this.changed = [];
    for (const wake of waiting) wake();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
