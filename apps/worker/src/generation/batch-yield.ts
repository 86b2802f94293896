import { BATCH_BAND } from "@ferry/protocol";
import type { Sequence } from "./sequence.js";

/** How long decode steps of batch lines alone wait for interactive prompts at most, in ms. */
const MAX_YIELD_MS = 50;

/**
 * Whether a step of offline batches' lines alone waits for an interactive prompt in flight on
 * the prefill thread: the step would take the core that prompt runs on, and the prompt's end
 * is the request's first token. The lines lose a step's time per interactive request.
 */
export class BatchYield {
  /** Since when decode steps of batch lines alone have waited for interactive prompts. */
  private since: number | undefined;

  /** Whether the step over `decode` waits for a prompt among `prefilling`. */
  yields(decode: readonly Sequence[], prefilling: ReadonlySet<Sequence>): boolean {
    const urgent =
      decode.every((s) => s.band === BATCH_BAND) &&
      [...prefilling].some((s) => s.band < BATCH_BAND);
    if (!urgent) {
      this.since = undefined;
      return false;
    }
    // prompts that end at their first token (max_tokens 1) never decode: a steady stream of
    // them must not stop the lines for good, so they yield for a while at a time
    const now = performance.now();
    this.since ??= now;
    if (now - this.since < MAX_YIELD_MS) return true;
    this.since = undefined;
    return false;
  }

  /** How long yielding lines wait still before they step anyway; undefined when none yield. */
  waitLeft(): number | undefined {
    return this.since === undefined
      ? undefined
      : Math.max(0, this.since + MAX_YIELD_MS - performance.now());
  }
}
