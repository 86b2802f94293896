import type { GrammarEngine, GrammarGuide } from "@ferry/guided/engine";
import type { Tokenizer } from "@ferry/model-repository";
import {
  type CompletionResult,
  FerryError,
  type GenerateJob,
  type JobEventBody,
  type ResumePoint,
} from "@ferry/protocol";
import type { LmRuntime } from "@ferry/runtime";
import { BatchYield } from "./batch-yield.js";
import type { GenerationMetrics } from "./generation-metrics.js";
import { givenUpBy } from "./given-up.js";
import type { Scheduler } from "./scheduler.js";
import type { Sequence } from "./sequence.js";
import { type Prompt, type SequenceHooks, SequenceIntake } from "./sequence-intake.js";
import { SequenceOutcomes } from "./sequence-outcomes.js";

/** What the engine runs a model through: the KV-cached LM runtime, or a fake in unit tests. */
export type EngineRuntime = Pick<LmRuntime, "stepScored" | "prefillScored" | "retain" | "release">;

export interface EngineOptions {
  /** Positions the model can attend to (prompt + completion). */
  contextLength: number;
  /**
   * Token ids the model knows: a client's own ids past it are refused before they join a
   * batch, where an out-of-range lookup would fail every sequence of the pass.
   */
  vocabSize?: number;
  /** Prefill joining sequences in the same pass as the decode (false: a pass of its own). */
  mixedPrefill?: boolean;
  /**
   * The runtime prefills on a thread of its own: joiners are admitted the moment they arrive
   * and their prompts run while the decode step in flight goes on, instead of after it.
   */
  prefillThread?: boolean;
  /** Whether the runtime keeps prompts' caches for prompts that begin the same way (metrics). */
  prefixCaching?: boolean;
  /** Whether finished completions' caches are kept too (see the scheduler's `prefix_cache_completions`). */
  prefixCacheCompletions?: boolean;
}

/** What a completion brings beside its job (see `Engine.submit`). */
export interface SubmitOptions {
  resume?: ResumePoint | undefined;
  onAdmitted?: (() => void) | undefined;
  priority?: number | undefined;
}

/**
 * The step loop of continuous batching: schedule, execute (one batched pass for joining
 * prompts, one for every running sequence's next token), process outputs (sample, detokenize,
 * stop rules, events). Runs while any sequence is waiting or running.
 */
export class Engine {
  /** Jobs become sequences here, or are refused before they take a seat. */
  private readonly intake: SequenceIntake;
  /** What a pass's outputs do to its sequences, and how they leave. */
  private readonly out: SequenceOutcomes;
  private looping = false;
  /** Sequences submitted and not yet in the scheduler (`arrival`). */
  private arriving = 0;
  /** Sequences whose prefill is on the prefill thread now; their caches are not released yet. */
  private readonly prefilling = new Set<Sequence>();
  /** Whether decode steps of batch lines alone wait for interactive prompts. */
  private readonly batchYield = new BatchYield();
  /** Wakes a loop that has nothing to decode until a prefill returns. */
  private wake: (() => void) | undefined;
  /** A decode step is in flight. */
  private stepping = false;
  /** One pass of the loop, chosen once for the configured strategy; false: nothing left. */
  private readonly step: () => Promise<boolean>;

  constructor(
    private readonly runtime: EngineRuntime,
    private readonly scheduler: Scheduler,
    tokenizer: Tokenizer,
    private readonly metrics: GenerationMetrics,
    private readonly options: EngineOptions,
    private readonly grammars?: GrammarEngine,
  ) {
    this.intake = new SequenceIntake(tokenizer, options, grammars);
    this.out = new SequenceOutcomes(
      runtime,
      scheduler,
      tokenizer,
      metrics,
      options,
      this.prefilling,
    );
    this.step = options.prefillThread
      ? () => this.stepWithPrefillThread()
      : options.mixedPrefill
        ? () => this.stepMixed()
        : () => this.stepSeparate();
  }

  /**
   * Adds a completion; resolves with its result once it finishes. `resume`: what an earlier
   * attempt already sent (a job taken over from a worker that died); the sequence continues
   * after its tokens, as if it had never stopped, and sends none of their text again.
   * `priority`: its request's (1 to 10); an offline batch's (1-3) yields seats to the others.
   */
  submit(
    job: GenerateJob,
    signal: AbortSignal,
    emit: (events: JobEventBody[]) => void,
    { resume, onAdmitted, priority }: SubmitOptions = {},
  ): Promise<CompletionResult> {
    const prompt = this.intake.prompt(job);
    if (prompt instanceof FerryError) return Promise.reject(prompt);
    const guided = this.intake.guided(job.params);
    if (guided instanceof FerryError) return Promise.reject(guided);
    const hooks = { emit, onAdmitted, priority };
    const arrived = this.arrival();
    if (!guided) return this.start(job, signal, hooks, resume, prompt, undefined, arrived);
    if (!this.grammars) {
      arrived();
      return Promise.reject(
        new FerryError("INVALID_INPUT", "guided decoding is off on this worker"),
      );
    }
    // the grammar compiles on its own thread; the sequence queues once its first mask is here,
    // or gives up its turn there when cancelled or past its deadline
    const waiting = givenUpBy(signal, job.deadline);
    return this.grammars
      .open(guided.spec, guided.vocabulary, [], waiting.signal, job.owner)
      .finally(waiting.done)
      .then(
        async (guide) => {
          try {
            return await this.start(job, signal, hooks, resume, prompt, guide, arrived);
          } finally {
            guide.close();
          }
        },
        (err) => {
          arrived();
          throw err;
        },
      );
  }

  /**
   * A sequence on its way to the scheduler (its grammar compiling, its first mask coming):
   * `whenIdle` waits for it too, so a version swapped out finishes what it took. Returns what
   * says it arrived (or failed), once.
   */
  private arrival(): () => void {
    this.arriving++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.arriving--;
    };
  }

  private start(
    job: GenerateJob,
    signal: AbortSignal,
    hooks: Omit<SequenceHooks, "resolve" | "reject">,
    resume: ResumePoint | undefined,
    prompt: Prompt,
    guide: GrammarGuide | undefined,
    arrived: () => void,
  ): Promise<CompletionResult> {
    return new Promise((resolve, reject) => {
      const seq = this.intake.sequence(job, signal, prompt, guide, { ...hooks, resolve, reject });
      if (resume && resume.ids.length > 0) {
        this.metrics.resumed.inc();
        if (this.replay(seq, resume)) return arrived();
      }
      // a replayed sequence's guide took its tokens: its prefill waits for their mask
      void (guide?.whenReady() ?? Promise.resolve()).then(() => {
        this.scheduler.add(seq);
        arrived();
        this.kick();
      });
    });
  }

  /**
   * Brings a fresh sequence to where an earlier attempt's last token event left it: same
   * detokenizer and stop-string state, same random draws used (one per sampled token). Its
   * prefill then covers prompt and replayed tokens. True when it is already finished.
   */
  private replay(seq: Sequence, { ids, logprobs }: ResumePoint): boolean {
    for (const [i, id] of ids.entries()) seq.replay(id, logprobs[i]);
    const reason = seq.finishedBy(this.options.contextLength);
    if (reason) this.out.finish(seq, reason);
    return reason !== undefined;
  }

  /** Resolves once no sequence waits or runs (for a swap or a drain). */
  async whenIdle(): Promise<void> {
    while (this.scheduler.hasWork || this.arriving > 0) await new Promise((r) => setTimeout(r, 20));
  }

  private kick(): void {
    if (this.options.prefillThread) this.admitNow();
    if (this.looping) return;
    this.looping = true;
    void this.loop().finally(() => {
      this.looping = false;
      if (this.scheduler.hasWork) this.kick();
    });
  }

  private async loop(): Promise<void> {
    while (this.scheduler.hasWork) {
      this.out.dropDead(this.scheduler.all());
      if (!(await this.step())) break;
    }
    this.metrics.running.set(0);
    this.metrics.waiting.set(this.scheduler.numWaiting);
  }

  private observeQueue(): void {
    this.metrics.running.set(this.scheduler.numRunning);
    this.metrics.waiting.set(this.scheduler.numWaiting);
  }

  /** Nothing to run now: waits out a static batch's gathering time. False: nothing left. */
  private async idle(): Promise<boolean> {
    const masks = this.scheduler.awaitingMasks();
    if (masks.length > 0) {
      await Promise.race(masks);
      return true;
    }
    const wait = this.scheduler.staticWaitLeft();
    if (wait === 0) return false;
    await new Promise((resolve) => setTimeout(resolve, wait));
    return true;
  }

  /**
   * Prompts in the plan's own passes: the joiners' prefill, then one decode step over the
   * running sequences (prefill_thread off, mixed_prefill off).
   */
  private async stepSeparate(): Promise<boolean> {
    return this.stepPlanned(async (prefill, decode) => {
      if (prefill.length > 0)
        this.out.advanceAll(
          prefill,
          await this.timed(prefill.length, () =>
            this.runtime.prefillScored(prefill.map((s) => s.prefillRow())),
          ),
          prefill.length,
        );
      if (decode.length > 0)
        this.out.advanceAll(
          decode,
          await this.timed(decode.length, () =>
            this.runtime.stepScored(decode.map((s) => s.decodeRow())),
          ),
        );
    });
  }

  /** Prompts in the decode step itself: one pass for joiners and running sequences alike. */
  private async stepMixed(): Promise<boolean> {
    return this.stepPlanned(async (prefill, decode) => {
      const rows = [...prefill.map((s) => s.prefillRow()), ...decode.map((s) => s.decodeRow())];
      const scores = await this.timed(rows.length, () => this.runtime.stepScored(rows));
      this.out.advanceAll([...prefill, ...decode], scores, prefill.length);
    });
  }

  private async stepPlanned(
    run: (prefill: Sequence[], decode: Sequence[]) => Promise<void>,
  ): Promise<boolean> {
    const plan = this.scheduler.schedule();
    this.out.dropCaches(plan.preempted);
    this.observeQueue();
    if (plan.prefill.length === 0 && plan.decode.length === 0) return this.idle();
    const now = performance.now();
    for (const seq of plan.prefill) seq.admitted(now);
    try {
      await run(plan.prefill, plan.decode);
    } catch (err) {
      for (const seq of [...plan.prefill, ...plan.decode]) this.out.fail(seq, modelError(err));
    }
    return true;
  }

  /**
   * With a prefill thread: admits joiners (their prefill starts at once), then runs one decode
   * step over every sequence that has its first token, or waits for a prefill to return.
   */
  private async stepWithPrefillThread(): Promise<boolean> {
    this.admitNow();
    const decode = this.scheduler.decodable();
    this.observeQueue();
    if (decode.length > 0 && !this.batchYield.yields(decode, this.prefilling)) {
      this.stepping = true;
      try {
        this.out.advanceAll(
          decode,
          await this.timed(decode.length, () =>
            this.runtime.stepScored(decode.map((s) => s.decodeRow())),
          ),
        );
      } catch (err) {
        for (const seq of decode) this.out.fail(seq, modelError(err));
      } finally {
        this.stepping = false;
      }
      return true;
    }
    if (this.prefilling.size > 0) {
      // lines yielding to a prompt step again when it returns, or when their wait runs out
      const left = decode.length > 0 ? this.batchYield.waitLeft() : undefined;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (left !== undefined) timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
      return true;
    }
    return this.idle();
  }

  /**
   * Seats waiting sequences and starts their prefill without waiting for it (on the prefill
   * thread while the decode thread is busy, else on the decode thread): the first token is
   * sampled (and sent) the moment the prompt has run, and the sequence decodes from the next
   * step on.
   */
  private admitNow(): void {
    this.out.dropDead(this.scheduler.queued());
    // with no decode step in flight or about to be sent, the decode thread is free and warm
    const decoderBusy = this.stepping || this.scheduler.decodable().length > 0;
    // a decode step in flight holds its sequences' rows: they give seats up between steps only
    if (!this.stepping) this.out.dropCaches(this.scheduler.preempt());
    const joining = this.scheduler.admit();
    if (joining.length === 0) return;
    const now = performance.now();
    for (const seq of joining) {
      seq.admitted(now);
      this.prefilling.add(seq);
    }
    this.timed(joining.length, () =>
      this.runtime.prefillScored(
        joining.map((s) => s.prefillRow()),
        decoderBusy,
      ),
    )
      .then(
        ({ logits, prompts, cached }) => {
          for (const seq of joining) this.prefilling.delete(seq);
          this.out.countPrefixes(joining, cached);
          // a sequence cancelled meanwhile kept its cache until now; it goes with it
          const gone = joining.filter((s) => !this.scheduler.holds(s));
          this.runtime.release(gone.map((s) => s.id));
          this.out.takeScores(joining, prompts);
          joining.forEach((seq, i) => {
            if (this.scheduler.holds(seq)) this.out.advance(seq, logits[i]);
          });
        },
        (err: unknown) => {
          for (const seq of joining) this.prefilling.delete(seq);
          for (const seq of joining)
            if (this.scheduler.holds(seq)) this.out.fail(seq, modelError(err));
        },
      )
      .finally(() => {
        const wake = this.wake;
        this.wake = undefined;
        wake?.();
        this.kick();
      });
  }

  /** Runs the model over `size` sequences, counted with the time it took. */
  private async timed<T>(size: number, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await run();
    } finally {
      this.metrics.execution(size, performance.now() - started);
    }
  }
}

function modelError(err: unknown): FerryError {
  return new FerryError("MODEL_ERROR", err instanceof Error ? err.message : String(err));
}
