/**
 * Every quantile a sketch answers is within this fraction of a true sample's value (DDSketch's
 * relative accuracy): 2%, so "3.1 ms" means 3.04 to 3.16 ms, whatever the model's scale.
 */
export const SKETCH_ACCURACY = 0.02;

const GAMMA = (1 + SKETCH_ACCURACY) / (1 - SKETCH_ACCURACY);
const LOG_GAMMA = Math.log(GAMMA);
/** Durations are told apart from 1 us to a day; shorter or longer ones count as these. */
const MIN_MS = 0.001;
const MAX_MS = 86_400_000;

/**
 * The bucket a duration falls in: bucket `i` holds (gamma^(i-1), gamma^i] ms. Log-spaced, so
 * buckets are as fine at 1 ms as at 10 s relative to the value, and the same for every process:
 * counts from any number of replicas add up bucket by bucket (HINCRBY) and stay exact.
 */
export function bucketOf(ms: number): number {
  const clamped = Math.min(Math.max(ms, MIN_MS), MAX_MS);
  return Math.ceil(Math.log(clamped) / LOG_GAMMA);
}

/** The value a bucket stands for: the one point within SKETCH_ACCURACY of both its bounds. */
export function valueOfBucket(bucket: number): number {
  return (2 * GAMMA ** bucket) / (GAMMA + 1);
}

/**
 * Counts of durations by log-spaced bucket (see bucketOf): mergeable, a few dozen buckets for
 * a model's usual spread, and true quantiles to SKETCH_ACCURACY, unlike a histogram's bounds.
 */
export class LatencySketch {
  readonly counts = new Map<number, number>();
  total = 0;

  add(ms: number): void {
    this.addBucket(bucketOf(ms), 1);
  }

  addBucket(bucket: number, n: number): void {
    if (n <= 0) return;
    this.counts.set(bucket, (this.counts.get(bucket) ?? 0) + n);
    this.total += n;
  }

  merge(other: LatencySketch): void {
    for (const [bucket, n] of other.counts) this.addBucket(bucket, n);
  }

  /**
   * The `q` quantile (0..1), null with nothing counted: the value of the sample at rank
   * floor(q * (n - 1)) of the sorted samples, to SKETCH_ACCURACY.
   */
  quantile(q: number): number | null {
    if (this.total === 0) return null;
    const rank = Math.floor(Math.min(Math.max(q, 0), 1) * (this.total - 1));
    let seen = 0;
    for (const bucket of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(bucket) ?? 0;
      if (seen > rank) return valueOfBucket(bucket);
    }
    return null;
  }
}

/** A quantile rounded to what the sketch knows: three significant digits. */
export function roundQuantile(ms: number | null): number | null {
  return ms === null ? null : Number(ms.toPrecision(3));
}
