import type { ChainableCommander } from "ioredis";
import { ActivityRecorder } from "../shared/activity-recorder.js";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { bucketOf } from "../shared/latency-sketch.js";
import { LuaCommand } from "../shared/lua-command.js";
import type { Parts } from "../shared/slowest-requests.js";
import {
  addTally,
  counterField,
  emptyTally,
  perVersion,
  type RequestTally,
  tallyRequest,
} from "../shared/version-counters.js";

/** How often a worker adds its counts to the shared ones, in ms. */
const FLUSH_MS = 1_000;

/** KEYS: the stats hash. ARGV: field, epoch ms. Keeps the later of the two. */
const KEEP_LATEST = `
local now = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > now then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0
`;

interface Pending extends RequestTally {
  rows: number;
  queueUs: number;
  /** batch size -> executions and their compute time */
  batches: Map<number, { count: number; us: number }>;
  lastMs: number;
}

const emptyPending = (): Pending => ({
  ...emptyTally(),
  rows: 0,
  queueUs: 0,
  batches: new Map(),
  lastMs: 0,
});

/**
 * What this worker's model executions cost, per model version: executions and their compute
 * time by batch size, computed rows and the time they waited for their batch. Counted in
 * process and added to the deployment's shared statistics once a second (a few commands a
 * second, none per row), where Triton's statistics extension reads them.
 */
export class ExecutionStats {
  private readonly pending = new Map<string, Map<string, Pending>>();
  private readonly keepLatest: LuaCommand<number>;
  /** The dashboard's recent activity of the completions this worker ran. */
  private readonly activity: ActivityRecorder;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.keepLatest = new LuaCommand(redis, "ferryKeepLatest", 1, KEEP_LATEST);
    this.activity = new ActivityRecorder(redis, keys);
  }

  start(): void {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), FLUSH_MS);
    this.timer.unref();
  }

  /** One execution of `size` rows that took `computeMs` in the runtime. */
  execution(model: string, version: string, size: number, computeMs: number): void {
    const p = this.of(model, version);
    const entry = p.batches.get(size) ?? { count: 0, us: 0 };
    entry.count++;
    entry.us += Math.round(computeMs * 1000);
    p.batches.set(size, entry);
    p.lastMs = Date.now();
  }

  /**
   * One request ended here, after `ms`: a text model's completion, whose answer the API only
   * relays (a classifier's requests are counted by the API, which answers them).
   */
  request(model: string, version: string, ms: number, failed: boolean): void {
    tallyRequest(this.of(model, version), ms, failed);
  }

  /**
   * A completion this worker ran, from its accept by the API to its end (a cancel is not
   * counted): its tokens, and where its time went should it be among the slowest. The API
   * relays a completion without timing it, so its version's recent activity is counted here.
   */
  completion(
    model: string,
    version: string,
    done: { id: string; total_ms: number; failed: boolean } & Parts,
  ): void {
    const { id, total_ms: ms, failed, ...parts } = done;
    this.activity.request(model, version, ms, bucketOf(ms), failed, id, {
      breakdown: () => parts,
    });
    if (done.tokens) this.activity.tokens(model, version, done.tokens);
  }

  /** One row computed, after `queueMs` waiting for its batch. */
  row(model: string, version: string, queueMs: number): void {
    const p = this.of(model, version);
    p.rows++;
    p.queueUs += Math.round(queueMs * 1000);
  }

  /** Adds the counts so far to the shared ones; one pipeline per model (one key each). */
  async flush(): Promise<void> {
    const activity = this.activity.flush();
    if (this.pending.size === 0) return activity;
    const pipelines: ChainableCommander[] = [];
    const latest: Array<Promise<number>> = [];
    for (const [model, byVersion] of this.pending) {
      const key = this.keys.stats(model);
      const pipeline = this.redis.pipeline();
      for (const [version, p] of byVersion) {
        addTally(pipeline, key, version, p);
        if (p.rows) pipeline.hincrby(key, counterField.rows(version), p.rows);
        if (p.queueUs) pipeline.hincrby(key, counterField.queueUs(version), p.queueUs);
        for (const [size, b] of p.batches) {
          pipeline.hincrby(key, counterField.executions(version, size), b.count);
          pipeline.hincrby(key, counterField.executionUs(version, size), b.us);
        }
        if (p.lastMs)
          latest.push(this.keepLatest.run(this.redis, key, counterField.last(version), p.lastMs));
      }
      pipelines.push(pipeline);
    }
    this.pending.clear();
    await Promise.all([...pipelines.map((p) => p.exec()), ...latest, activity]);
  }

  /** Stops the timer and adds what is left. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  private of(model: string, version: string): Pending {
    return perVersion(this.pending, model, version, emptyPending);
  }
}
