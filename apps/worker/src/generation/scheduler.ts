import type { Sequence } from "./sequence.js";

export interface SchedulerOptions {
  /** Sequences decoding at once at most (vLLM's max_num_seqs). */
  maxNumSeqs: number;
  /** Prompt tokens one step may prefill at most (vLLM's max_num_batched_tokens). */
  maxBatchedTokens: number;
  /**
   * "continuous" (default): sequences join at any step. "static": a batch forms only when the
   * last one has finished, from a full set of waiting sequences or whatever waited
   * `staticWaitMs`, and runs to completion — the baseline continuous batching beats.
   */
  policy?: "continuous" | "static";
  /** @defaultValue 50 */
  staticWaitMs?: number;
}

/** This step's work: sequences joining (their prompts run) and sequences decoding one token. */
export interface StepPlan {
  prefill: Sequence[];
  decode: Sequence[];
}

/**
 * Iteration-level scheduling: every step decodes every running sequence; waiting sequences
 * join, first come first served, while seats and the prefill token budget last. A sequence
 * that leaves frees its seat for the very next step.
 */
export class Scheduler {
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];

  constructor(private readonly options: SchedulerOptions) {}

  /** When a static batch is not ready yet, how long until it is (ms); else 0. */
  staticWaitLeft(): number {
    if (this.options.policy !== "static" || this.running.length > 0 || this.waiting.length === 0)
      return 0;
    if (this.waiting.length >= this.options.maxNumSeqs) return 0;
    const oldest = this.waiting[0]?.enqueuedAt ?? performance.now();
    return Math.max(0, oldest + (this.options.staticWaitMs ?? 50) - performance.now());
  }

  private staticBatchReady(): boolean {
    return this.running.length === 0 && this.staticWaitLeft() === 0;
  }

  add(seq: Sequence): void {
    this.waiting.push(seq);
  }

  remove(seq: Sequence): void {
    for (const list of [this.waiting, this.running]) {
      const at = list.indexOf(seq);
      if (at >= 0) list.splice(at, 1);
    }
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  get numRunning(): number {
    return this.running.length;
  }

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Every sequence the engine holds, waiting or running. */
  all(): Sequence[] {
    return [...this.waiting, ...this.running];
  }

  schedule(): StepPlan {
    const decode = this.decodable();
    return { prefill: this.admit(), decode };
  }

  /**
   * Running sequences with a token to feed: all but those whose prefill has not returned, and
   * guided ones whose next mask is not back from the grammar thread (they sit the step out
   * rather than hold the others).
   */
  decodable(): Sequence[] {
    return this.running.filter((s) => s.pending !== undefined && (s.guide?.ready ?? true));
  }

  /** What running sequences wait for before they can decode: their guides' next masks. */
  awaitingMasks(): Promise<void>[] {
    const waits: Promise<void>[] = [];
    for (const s of this.running)
      if (s.pending !== undefined && s.guide && !s.guide.ready) waits.push(s.guide.whenReady());
    return waits;
  }

  /** Waiting sequences that take seats now, first come first served, within the token budget. */
  admit(): Sequence[] {
    if (this.options.policy === "static" && !this.staticBatchReady()) return [];
    const prefill: Sequence[] = [];
    let budget = this.options.maxBatchedTokens;
    while (this.waiting.length > 0 && this.running.length < this.options.maxNumSeqs) {
      const next = this.waiting[0];
      if (!next) break;
      // a prompt longer than the whole budget still runs, alone, rather than never
      const tokens = next.prefillIds().length;
      if (tokens > budget && prefill.length > 0) break;
      budget -= tokens;
      this.waiting.shift();
      this.running.push(next);
      prefill.push(next);
    }
    return prefill;
  }

  /** True while the sequence has not left (finished, failed or cancelled). */
  holds(seq: Sequence): boolean {
    return this.running.includes(seq) || this.waiting.includes(seq);
  }

  /** Sequences not admitted yet. */
  queued(): Sequence[] {
    return [...this.waiting];
  }
}
