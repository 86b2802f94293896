import {
  ACTIVITY_STEP_MS,
  ACTIVITY_WINDOW_MS,
  activityField,
  SLOWEST_SPAN_MS,
} from "../shared/activity-recorder.js";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LatencySketch, roundQuantile } from "../shared/latency-sketch.js";
import { SLOWEST_KEPT, type SlowRequest } from "../shared/slowest-requests.js";

/** One step of a model version's time series. */
export interface ActivityPoint {
  /** When the step began, epoch ms. */
  at: number;
  requests_per_s: number;
  errors_per_s: number;
  tokens_per_s: number;
  /** Mean waiting work sampled in the step; null where nothing sampled it. */
  depth: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
}

/** A model version over the last minutes, as every process counted it. */
export interface RecentActivity {
  step_s: number;
  window_s: number;
  points: ActivityPoint[];
  /** Over the window: requests, errors, and the true quantiles of their latency. */
  requests: number;
  errors: number;
  p50_ms: number | null;
  p99_ms: number | null;
  /** The slowest requests of the window, slowest first. */
  slowest: SlowRequest[];
}

interface Step {
  requests: number;
  errors: number;
  tokens: number;
  depthSum: number;
  depthSamples: number;
  latency: LatencySketch;
}

/**
 * A step or minute every process has flushed (they flush each second; a worker busy on a long
 * batch a few seconds late) no longer changes: read once, kept here until it leaves the window,
 * so a dashboard polling each second reads only the newest keys.
 */
const SETTLED_MS = 5_000;

/** Reads the dashboard's time series and slowest requests (see ActivityRecorder). */
export class ActivityReader {
  /** queue -> key -> a settled step or minute, as read */
  private readonly settled = new Map<string, Map<string, Value>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly now: () => number = Date.now,
  ) {}

  async read(queue: string): Promise<RecentActivity> {
    const now = this.now();
    // the newest step shown is the last one every process has flushed once: a step still
    // being counted would draw as a dip
    const last = Math.floor((now - 1_000) / ACTIVITY_STEP_MS) - 1;
    const count = ACTIVITY_WINDOW_MS / ACTIVITY_STEP_MS;
    const steps = Array.from({ length: count }, (_, k) => last - count + 1 + k);
    const minutes: number[] = [];
    const lastMinute = Math.floor(now / SLOWEST_SPAN_MS);
    for (let m = Math.floor((now - ACTIVITY_WINDOW_MS) / SLOWEST_SPAN_MS); m <= lastMinute; m++)
      minutes.push(m);
    const values = await this.load(queue, now, [
      ...steps.map((s) => ({
        key: this.keys.activity(queue, s),
        step: true,
        end: (s + 1) * ACTIVITY_STEP_MS,
      })),
      ...minutes.map((m) => ({
        key: this.keys.slowest(queue, m),
        step: false,
        end: (m + 1) * SLOWEST_SPAN_MS,
      })),
    ]);

    const window = new LatencySketch();
    let requests = 0;
    let errors = 0;
    const perS = (n: number) => round2((n * 1000) / ACTIVITY_STEP_MS);
    const points = steps.map((s) => {
      const step = (values.get(this.keys.activity(queue, s)) as Step | undefined) ?? emptyStep();
      window.merge(step.latency);
      requests += step.requests;
      errors += step.errors;
      return {
        at: s * ACTIVITY_STEP_MS,
        requests_per_s: perS(step.requests),
        errors_per_s: perS(step.errors),
        tokens_per_s: perS(step.tokens),
        depth: step.depthSamples > 0 ? round2(step.depthSum / step.depthSamples) : null,
        p50_ms: roundQuantile(step.latency.quantile(0.5)),
        p99_ms: roundQuantile(step.latency.quantile(0.99)),
      };
    });
    const slowest = minutes
      .flatMap((m) => (values.get(this.keys.slowest(queue, m)) as SlowRequest[] | undefined) ?? [])
      .filter((r) => r.at >= now - ACTIVITY_WINDOW_MS)
      .sort((a, b) => b.total_ms - a.total_ms)
      .slice(0, SLOWEST_KEPT);
    return {
      step_s: ACTIVITY_STEP_MS / 1000,
      window_s: ACTIVITY_WINDOW_MS / 1000,
      points,
      requests,
      errors,
      p50_ms: roundQuantile(window.quantile(0.5)),
      p99_ms: roundQuantile(window.quantile(0.99)),
      slowest,
    };
  }

  /**
   * The keys' values (a step's hash, or a minute's slowest), settled ones from memory and the
   * rest in one pipeline (a queue's keys share its slot). `end`: when a key stops taking counts.
   */
  private async load(queue: string, now: number, wanted: Wanted[]): Promise<Map<string, Value>> {
    const was = this.settled.get(queue);
    const values = new Map<string, Value>();
    const kept = new Map<string, Value>();
    const missing: Wanted[] = [];
    for (const w of wanted) {
      const value = was?.get(w.key);
      if (value === undefined) missing.push(w);
      else {
        values.set(w.key, value);
        kept.set(w.key, value);
      }
    }
    // what left the window is forgotten with the map it was in
    this.settled.set(queue, kept);
    if (missing.length === 0) return values;
    const pipeline = this.redis.pipeline();
    for (const { key, step } of missing)
      if (step) pipeline.hgetall(key);
      else pipeline.zrevrange(key, 0, SLOWEST_KEPT - 1);
    const replies = (await pipeline.exec()) ?? [];
    missing.forEach(({ key, step, end }, k) => {
      const [err, reply] = replies[k] ?? [new Error("no reply")];
      if (err) throw err;
      const value = step
        ? parseStep(reply as Record<string, string>)
        : parseSlowest(reply as string[]);
      values.set(key, value);
      if (end <= now - SETTLED_MS) kept.set(key, value);
    });
    return values;
  }
}

type Value = Step | SlowRequest[];

/** A key to read: a step's hash or a minute's slowest, and when it stops taking counts. */
interface Wanted {
  key: string;
  step: boolean;
  end: number;
}

const emptyStep = (): Step => ({
  requests: 0,
  errors: 0,
  tokens: 0,
  depthSum: 0,
  depthSamples: 0,
  latency: new LatencySketch(),
});

function parseStep(raw: Record<string, string>): Step {
  const step = emptyStep();
  for (const [field, value] of Object.entries(raw)) {
    const n = Number(value);
    if (field === activityField.requests) step.requests = n;
    else if (field === activityField.errors) step.errors = n;
    else if (field === activityField.tokens) step.tokens = n;
    else if (field === activityField.depthSum) step.depthSum = n;
    else if (field === activityField.depthSamples) step.depthSamples = n;
    else if (field.startsWith("lat:")) step.latency.addBucket(Number(field.slice(4)), n);
  }
  return step;
}

function parseSlowest(members: string[]): SlowRequest[] {
  const out: SlowRequest[] = [];
  for (const member of members) {
    try {
      out.push(JSON.parse(member) as SlowRequest);
    } catch {
      // another version's member: skipped, not fatal to the dashboard
    }
  }
  return out;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
