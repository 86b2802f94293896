import type { Tokenizer } from "@ferry/model-repository";
import { FerryError, type FinishReason } from "@ferry/protocol";
import type { LmOutput, LmRuntime, PromptScores } from "@ferry/runtime";
import type { GenerationMetrics } from "./generation-metrics.js";
import { countPrefixHits, nextToken, type PassContext, takePromptScores } from "./pass-outputs.js";
import type { Scheduler } from "./scheduler.js";
import type { Sequence } from "./sequence.js";

/**
 * What a pass's outputs do to its sequences (a token sampled, a stop rule met) and how a
 * sequence leaves the engine (finished, failed, cancelled, past its deadline): its seat, its
 * cache and its statistics, whichever step strategy ran it.
 */
export class SequenceOutcomes {
  /** What a pass's outputs become tokens with. */
  private readonly pass: PassContext;

  constructor(
    private readonly runtime: Pick<LmRuntime, "retain" | "release">,
    private readonly scheduler: Scheduler,
    private readonly tokenizer: Tokenizer,
    private readonly metrics: GenerationMetrics,
    private readonly options: {
      contextLength: number;
      prefixCaching?: boolean;
      prefixCacheCompletions?: boolean;
    },
    /** Sequences whose prefill is on the prefill thread now; their caches are not released yet. */
    private readonly prefilling: ReadonlySet<Sequence>,
  ) {
    this.pass = { tokenizer, metrics, contextLength: options.contextLength };
  }

  /** A step's outputs, its first `prefills` rows the sequences' prefills. */
  advanceAll(seqs: Sequence[], { logits, prompts, cached }: LmOutput, prefills = 0): void {
    this.countPrefixes(seqs.slice(0, prefills), cached);
    this.takeScores(seqs, prompts);
    for (const [i, seq] of seqs.entries()) this.advance(seq, logits[i]);
  }

  /** What the prefix cache gave the prefills, when the runtime keeps prompts' caches. */
  countPrefixes(prefilled: readonly Sequence[], cached: readonly number[]): void {
    if (this.options.prefixCaching) countPrefixHits(prefilled, cached, this.metrics);
  }

  takeScores(seqs: readonly Sequence[], prompts: readonly PromptScores[]): void {
    takePromptScores(seqs, prompts, this.tokenizer);
  }

  /** Samples the sequence's next token and applies the stop rules. */
  advance(seq: Sequence, logits: Float32Array | undefined): void {
    if (!logits) return;
    const ends = nextToken(seq, logits, this.pass);
    if (ends instanceof FerryError) this.fail(seq, ends);
    else if (ends) this.finish(seq, ends);
  }

  finish(seq: Sequence, reason: FinishReason): void {
    // what it read and wrote may begin its conversation's next turn
    if (this.options.prefixCacheCompletions && !this.prefilling.has(seq))
      void this.runtime.retain(seq.id, [...seq.promptIds, ...seq.generated]);
    this.leave(seq);
    this.count(seq, false);
    seq.finish(reason);
  }

  fail(seq: Sequence, error: FerryError): void {
    this.leave(seq);
    // a cancel is the client's leaving, not the model's failing
    if (error.code !== "CANCELLED") this.count(seq, true);
    seq.fail(error);
  }

  /** Frees preempted sequences' caches: they are computed again when they rejoin. */
  dropCaches(preempted: readonly Sequence[]): void {
    if (preempted.length === 0) return;
    this.metrics.preempted.inc(preempted.length);
    this.runtime.release(preempted.map((s) => s.id));
  }

  /**
   * Cancelled sequences leave now; waiting ones past their deadline are never started. Only
   * between decode steps for running ones: a step in flight still holds their rows.
   */
  dropDead(seqs: Sequence[]): void {
    const now = Date.now();
    for (const seq of seqs) {
      if (seq.signal.aborted) {
        this.metrics.cancelled.inc();
        this.fail(seq, new FerryError("CANCELLED", "generation was cancelled"));
      } else if (seq.startedAt === undefined && seq.deadline <= now) {
        this.fail(
          seq,
          new FerryError("DEADLINE_EXCEEDED", "deadline passed while queued; not computed"),
        );
      }
    }
  }

  /** A sequence's end in the version's statistics: its wait for a seat, its whole time here. */
  private count(seq: Sequence, failed: boolean): void {
    const now = performance.now();
    this.metrics.finished((seq.startedAt ?? now) - seq.enqueuedAt, now - seq.enqueuedAt, failed);
  }

  private leave(seq: Sequence): void {
    this.scheduler.remove(seq);
    // a prefill in flight would bring the cache back after a release; it is released on return
    if (!this.prefilling.has(seq)) this.runtime.release([seq.id]);
  }
}
