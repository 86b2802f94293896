import type { VersionCounters } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { versionStatistics } from "./triton-stats.js";

const counters: VersionCounters = {
  requests: 5,
  errors: 1,
  ok_us: 4_000,
  fail_us: 900,
  cache_hits: 2,
  cache_hit_us: 300,
  cache_misses: 5,
  rows: 6,
  queue_us: 1_200,
  // two runs of one row (100 us in all) and one of four (400 us)
  batches: { 4: { count: 1, us: 400 }, 1: { count: 2, us: 100 } },
  last_ms: 1_700_000_000_000,
};

describe("versionStatistics (Triton's statistics from the shared counters)", () => {
  it("a request's compute is its batch's run; cache hits are answers; batch sizes in order", () => {
    const s = versionStatistics("m", "1", counters);
    expect(s).toMatchObject({ name: "m", version: "1", inference_count: 6, execution_count: 3 });
    expect(s.last_inference).toBe(1_700_000_000_000);
    expect(s.inference_stats).toEqual({
      success: { count: 6, ns: 4_300_000 },
      fail: { count: 1, ns: 900_000 },
      queue: { count: 6, ns: 1_200_000 },
      compute_input: { count: 6, ns: 0 },
      // 2 x 50 us for the single rows, 4 x 400 us for the rows of the batch of four
      compute_infer: { count: 6, ns: 1_700_000 },
      compute_output: { count: 6, ns: 0 },
      cache_hit: { count: 2, ns: 300_000 },
      cache_miss: { count: 5, ns: 0 },
    });
    expect(s.batch_stats.map((b) => [b.batch_size, b.compute_infer])).toEqual([
      [1, { count: 2, ns: 100_000 }],
      [4, { count: 1, ns: 400_000 }],
    ]);
  });
});
