import { BATCH_BAND } from "@ferry/protocol";
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
  /**
   * The share of seats (0 to 1) offline batches' sequences (the lowest priority band) may hold
   * while sequences of a higher band wait: past it, the latest-admitted of them give their
   * seats up. With nothing else waiting they take every seat. @defaultValue 0.5
   */
  batchSeatShare?: number;
  /**
   * Seats offline batches' sequences never take, even with nothing else waiting: an
   * interactive request that arrives mid-step finds one and its prompt starts at once (on the
   * prefill thread), instead of waiting out the step for a batch line to be preempted.
   * @defaultValue 0
   */
  batchReservedSeats?: number;
}

/**
 * This step's work: sequences joining (their prompts run), sequences decoding one token, and
 * sequences preempted (their caches to free; they wait again).
 */
export interface StepPlan {
  prefill: Sequence[];
  decode: Sequence[];
  preempted: Sequence[];
}

/**
 * Iteration-level scheduling: every step decodes every running sequence; waiting sequences
 * join, highest priority band first and first come first served within one, while seats and
 * the prefill token budget last. A sequence that leaves frees its seat for the very next step.
 * Offline batches' sequences yield: while others wait they hold `batchSeatShare` of the seats
 * at most, the rest preempted at once rather than finished first.
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

  /** Queues a sequence behind those of its band and above (a preempted one: ahead of its band). */
  add(seq: Sequence): void {
    const behind = (w: Sequence) => (seq.preemptions > 0 ? w.band >= seq.band : w.band > seq.band);
    const at = this.waiting.findIndex(behind);
    if (at < 0) this.waiting.push(seq);
    else this.waiting.splice(at, 0, seq);
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
    const preempted = this.preempt();
    const decode = this.decodable();
    return { prefill: this.admit(), decode, preempted };
  }

  /**
   * Batch-band sequences that give their seats up now, so that waiting sequences of a higher
   * band join at this step: as many as those lack seats, down to the batch band's share, the
   * latest admitted first (they lose the least work). Only those able to decode (a prefill in
   * flight or a guide's mask still coming is left be). They wait again at the head of their
   * band; the caller frees their caches.
   */
  preempt(): Sequence[] {
    if (this.options.policy === "static") return [];
    const urgent = this.waiting.filter((s) => s.band < BATCH_BAND).length;
    const batch = this.running.filter((s) => s.band === BATCH_BAND);
    const share = Math.floor((this.options.batchSeatShare ?? 0.5) * this.options.maxNumSeqs);
    let need = Math.min(
      urgent - (this.options.maxNumSeqs - this.running.length),
      batch.length - share,
    );
    const preempted: Sequence[] = [];
    for (let k = batch.length - 1; k >= 0 && need > 0; k--) {
      const seq = batch[k];
      if (!seq || seq.pending === undefined || !(seq.guide?.ready ?? true)) continue;
      this.running.splice(this.running.indexOf(seq), 1);
      seq.preempted();
      preempted.push(seq);
      need--;
    }
    // each goes to the head of its band, latest first: they rejoin in the order they first joined
    for (const seq of preempted) this.add(seq);
    return preempted;
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
    // the waiting queue is in band order: a batch line at its head means none other waits
    const batchSeats = this.options.maxNumSeqs - this.batchReserve();
    while (this.waiting.length > 0 && this.running.length < this.options.maxNumSeqs) {
      const next = this.waiting[0];
      if (!next) break;
      if (next.band === BATCH_BAND && this.running.length >= batchSeats) break;
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

  /** Seats kept from batch lines: at most all but one (a batch still runs, a line at a time). */
  private batchReserve(): number {
    if (this.options.policy === "static") return 0;
    const reserve = Math.floor(this.options.batchReservedSeats ?? 0);
    return Math.max(0, Math.min(reserve, this.options.maxNumSeqs - 1));
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
