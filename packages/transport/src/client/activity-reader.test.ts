import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import {
  ACTIVITY_STEP_MS,
  ACTIVITY_WINDOW_MS,
  ActivityRecorder,
} from "../shared/activity-recorder.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { bucketOf } from "../shared/latency-sketch.js";
import { ActivityReader } from "./activity-reader.js";

// Real Redis (never mocked), under a prefix of this file's own; the processes' clock is the
// test's, so that steps and minutes fall where it says.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(url);
afterAll(async () => {
  redis.disconnect();
  await deletePrefix(url, keys.prefix);
});

/** A step boundary well in the past, so that the keys' TTLs (from now) do not matter. */
let now = Math.floor(Date.now() / 60_000) * 60_000;
const clock = () => now;
const parts = (queue: number, batch: number, compute: number) => ({
  breakdown: () => ({ queue_ms: queue, batch_ms: batch, compute_ms: compute }),
});

describe("a model version's recent activity", () => {
  it("adds up what several replicas counted: rates, true quantiles, depth and the slowest requests", async () => {
    const replicas = [
      new ActivityRecorder(redis, keys, clock),
      new ActivityRecorder(redis, keys, clock),
    ];
    const latencies: number[] = [];
    // three steps of traffic: 40 requests per step per replica, 1..80 ms, and one slow one
    for (let step = 0; step < 3; step++) {
      for (const [r, replica] of replicas.entries()) {
        for (let k = 0; k < 40; k++) {
          const ms = 1 + ((k * 2 + r) % 80);
          latencies.push(ms);
          replica.request(
            "m",
            "1",
            ms,
            bucketOf(ms),
            k === 0,
            `r${r}-${step}-${k}`,
            parts(1, 2, ms - 3),
          );
        }
        replica.tokens("m", "1", 10);
        replica.depth("m.v1", 4 + r * 2);
        await replica.flush();
      }
      now += ACTIVITY_STEP_MS;
    }
    replicas[0]?.request("m", "1", 900, bucketOf(900), false, "the-slow-one", parts(850, 20, 30));
    latencies.push(900);
    await replicas[0]?.flush();
    now += 2 * ACTIVITY_STEP_MS + 1_000;

    const recent = await new ActivityReader(redis, keys, clock).read("m.v1");
    expect(recent.points).toHaveLength(ACTIVITY_WINDOW_MS / ACTIVITY_STEP_MS);
    const busy = recent.points.filter((p) => p.requests_per_s > 0);
    expect(busy.map((p) => p.requests_per_s)).toEqual([40, 40, 40, 0.5]);
    expect(busy.slice(0, 3).map((p) => p.tokens_per_s)).toEqual([10, 10, 10]);
    expect(busy.slice(0, 3).map((p) => p.depth)).toEqual([5, 5, 5]);
    expect(busy.slice(0, 3).map((p) => p.errors_per_s)).toEqual([1, 1, 1]);
    expect(recent.requests).toBe(latencies.length);
    expect(recent.errors).toBe(6);

    const sorted = [...latencies].sort((a, b) => a - b);
    const exact = (q: number) => sorted[Math.floor(q * (sorted.length - 1))] ?? 0;
    for (const [q, got] of [
      [0.5, recent.p50_ms],
      [0.99, recent.p99_ms],
    ] as const)
      expect(Math.abs((got ?? 0) - exact(q))).toBeLessThanOrEqual(exact(q) * 0.021);

    expect(recent.slowest).toHaveLength(10);
    expect(recent.slowest[0]).toMatchObject({
      id: "the-slow-one",
      total_ms: 900,
      queue_ms: 850,
      batch_ms: 20,
      compute_ms: 30,
    });
    const totals = recent.slowest.map((r) => r.total_ms);
    expect(totals).toEqual([...totals].sort((a, b) => b - a));
    // every replica's slowest met in one list: 80 ms came from both
    expect(totals.slice(1, 3)).toEqual([80, 80]);

    // every key has its TTL
    const written = await redis.keys(`${keys.prefix}:*`);
    expect(written.length).toBeGreaterThan(0);
    for (const key of written) expect(await redis.ttl(key)).toBeGreaterThan(0);
  });

  it("reads a settled step once; what leaves the window is gone from the series", async () => {
    const reader = new ActivityReader(redis, keys, clock);
    const recorder = new ActivityRecorder(redis, keys, clock);
    recorder.request("n", "2", 5, bucketOf(5), false, "a");
    await recorder.flush();
    now += ACTIVITY_STEP_MS + 5_000;
    const first = await reader.read("n.v2");
    expect(first.requests).toBe(1);
    // a write to a settled step after it was read is not seen again: only new keys are read
    await redis.hincrby(
      keys.activity("n.v2", Math.floor((now - ACTIVITY_STEP_MS - 5_000) / ACTIVITY_STEP_MS)),
      "req",
      100,
    );
    expect((await reader.read("n.v2")).requests).toBe(1);
    now += ACTIVITY_WINDOW_MS + 60_000;
    const later = await reader.read("n.v2");
    expect(later.requests).toBe(0);
    expect(later.slowest).toEqual([]);
    expect(later.p50_ms).toBeNull();
  });
});
