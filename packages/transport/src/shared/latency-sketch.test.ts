import { describe, expect, it } from "vitest";
import { bucketOf, LatencySketch, SKETCH_ACCURACY, valueOfBucket } from "./latency-sketch.js";

/** A seeded generator (mulberry32): the same samples on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The sample at rank floor(q * (n - 1)) of the sorted samples: what the sketch estimates. */
function exact(sorted: number[], q: number): number {
  return sorted[Math.floor(q * (sorted.length - 1))] ?? Number.NaN;
}

const QUANTILES = [0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1];

function expectWithinAccuracy(sketch: LatencySketch, samples: number[]): void {
  const sorted = [...samples].sort((a, b) => a - b);
  for (const q of QUANTILES) {
    const truth = exact(sorted, q);
    const estimate = sketch.quantile(q) ?? Number.NaN;
    // the bound is exact in real numbers; a hair for the floating point of log and pow
    expect(Math.abs(estimate - truth), `q=${q}: ${estimate} for ${truth}`).toBeLessThanOrEqual(
      truth * SKETCH_ACCURACY * (1 + 1e-9),
    );
  }
}

describe("latency sketch", () => {
  it("answers every quantile of a log-normal latency within 2% of the true sample", () => {
    const next = random(7);
    // a 3 ms model with a long tail: the case where bucket bounds said "p50 5 ms"
    const samples = Array.from({ length: 20_000 }, () => {
      const normal = Math.sqrt(-2 * Math.log(next() || 1e-12)) * Math.cos(2 * Math.PI * next());
      return 3 * Math.exp(0.6 * normal);
    });
    const sketch = new LatencySketch();
    for (const ms of samples) sketch.add(ms);
    expectWithinAccuracy(sketch, samples);
    expect(sketch.quantile(0.5)).toBeGreaterThan(2.9);
    expect(sketch.quantile(0.5)).toBeLessThan(3.1);
  });

  it("stays within 2% from microseconds to minutes, and for a handful of samples", () => {
    const next = random(11);
    const wide = Array.from({ length: 5_000 }, () => 10 ** (next() * 8 - 3));
    const sketch = new LatencySketch();
    for (const ms of wide) sketch.add(ms);
    expectWithinAccuracy(sketch, wide);

    const few = [3.2, 41, 7.7];
    const small = new LatencySketch();
    for (const ms of few) small.add(ms);
    expectWithinAccuracy(small, few);
  });

  it("merged from replicas, bucket by bucket, answers as one sketch of all the samples", () => {
    const next = random(3);
    const replicas = [1, 2, 3].map((k) => Array.from({ length: 3_000 }, () => k * 2 + next() * 40));
    const merged = new LatencySketch();
    for (const samples of replicas) {
      const one = new LatencySketch();
      for (const ms of samples) one.add(ms);
      // as Redis holds them: bucket -> count, added up
      const other = new LatencySketch();
      for (const [bucket, n] of one.counts) other.addBucket(bucket, n);
      merged.merge(other);
    }
    expect(merged.total).toBe(9_000);
    expectWithinAccuracy(merged, replicas.flat());
  });

  it("knows nothing of an empty sketch, and clamps what it cannot tell apart", () => {
    expect(new LatencySketch().quantile(0.5)).toBeNull();
    const sketch = new LatencySketch();
    sketch.add(0);
    sketch.add(-1);
    expect(sketch.quantile(0.5)).toBeCloseTo(0.001, 4);
    // a day, to 2%
    expect(valueOfBucket(bucketOf(1e12)) / 86_400_000).toBeCloseTo(1, 1);
  });
});
