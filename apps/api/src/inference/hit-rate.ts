/** Lookups the hit rate is smoothed over (an exponential window of about this many). */
const WINDOW = 1_000;
/** Lookups seen before the rate says anything (a cold cache is given the benefit of the doubt). */
const MIN_LOOKUPS = 50;
/** Below this share of hits, a cache is said to rarely hit. */
const RARELY = 0.05;

/**
 * How often a model's prediction cache has answered lately, as this API process saw it.
 * Admission asks it: a request of a model whose cache rarely hits is refused at the gate,
 * before its body is read, like one of a model with no cache; looking it up first would cost
 * every refusal a body parse, a hash and a Redis round trip, for an answer that is almost
 * never there.
 */
export class HitRate {
  private lookups = 0;
  private hits = 0;

  record(hit: boolean): void {
    const keep = 1 - 1 / WINDOW;
    this.lookups = this.lookups * keep + 1;
    this.hits = this.hits * keep + (hit ? 1 : 0);
  }

  rarelyHits(): boolean {
    return this.lookups >= MIN_LOOKUPS && this.hits / this.lookups < RARELY;
  }
}
