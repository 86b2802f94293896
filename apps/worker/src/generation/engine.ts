import { randomInt } from "node:crypto";
import { guidedProblem, guidedSpecOf } from "@ferry/guided";
import { bitmaskOf, type GrammarEngine, type GrammarGuide } from "@ferry/guided/engine";
import type { Tokenizer } from "@ferry/model-repository";
import {
  BATCH_BAND,
  type CompletionResult,
  FerryError,
  type FinishReason,
  type GenerateJob,
  type JobEventBody,
  outOfVocabulary,
  type ResumePoint,
  type SamplingParams,
  unknownSamplingFields,
} from "@ferry/protocol";
import type { LmOutput, LmRuntime, PromptScores } from "@ferry/runtime";
import type { GenerationMetrics } from "./generation-metrics.js";
import { badWordIds, changesLogits, processLogits } from "./logits-processors.js";
import { promptLogprobs, tokenLogprob } from "./logprobs.js";
import { OutputProcessor } from "./output-processor.js";
import { sample, seededRandom } from "./sampler.js";
import type { Scheduler } from "./scheduler.js";
import { Sequence } from "./sequence.js";

/** What the engine runs a model through: the KV-cached LM runtime, or a fake in unit tests. */
/** How long decode steps of batch lines alone wait for interactive prompts at most, in ms. */
const MAX_YIELD_MS = 50;

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
  private nextSeq = 1;
  private looping = false;
  /** Sequences whose prefill is on the prefill thread now; their caches are not released yet. */
  private readonly prefilling = new Set<Sequence>();
  /** Since when decode steps of batch lines alone have waited for interactive prompts. */
  private yieldingSince: number | undefined;
  /** Wakes a loop that has nothing to decode until a prefill returns. */
  private wake: (() => void) | undefined;
  /** A decode step is in flight. */
  private stepping = false;
  /** One pass of the loop, chosen once for the configured strategy; false: nothing left. */
  private readonly step: () => Promise<boolean>;

  constructor(
    private readonly runtime: EngineRuntime,
    private readonly scheduler: Scheduler,
    private readonly tokenizer: Tokenizer,
    private readonly metrics: GenerationMetrics,
    private readonly options: EngineOptions,
    private readonly grammars?: GrammarEngine,
  ) {
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
    const unknownFields = unknownSamplingFields(job.params);
    if (unknownFields.length > 0)
      return Promise.reject(
        new FerryError(
          "INVALID_INPUT",
          `This worker does not know the sampling field(s) ${unknownFields.join(", ")}: is the API newer than its workers?`,
        ),
      );
    const whole =
      job.prompt_ids ?? this.tokenizer.encode(job.prompt, job.params.add_special_tokens ?? false);
    // vLLM's truncate_prompt_tokens: the last ones are read
    const keep = job.params.truncate_prompt_tokens;
    const promptIds = keep !== undefined && whole.length > keep ? whole.slice(-keep) : whole;
    if (promptIds.length === 0)
      return Promise.reject(new FerryError("INVALID_INPUT", "prompt is empty"));
    const unknown = outOfVocabulary(promptIds, this.options.vocabSize);
    if (unknown !== undefined)
      return Promise.reject(
        new FerryError("INVALID_INPUT", `Token id ${unknown} is out of vocabulary`),
      );
    if (promptIds.length >= this.options.contextLength) {
      const message = `This model's maximum context length is ${this.options.contextLength} tokens; the prompt has ${promptIds.length}`;
      return Promise.reject(new FerryError("INVALID_INPUT", message));
    }
    const guided = this.guideOf(job.params);
    if (guided instanceof FerryError) return Promise.reject(guided);
    const started = { emit, resume, onAdmitted, priority };
    if (!guided) return this.start(job, signal, started, promptIds, whole, undefined);
    // the grammar compiles on its own thread; the sequence queues once its first mask is here
    return (
      this.grammars?.open(guided.spec, guided.vocabulary).then(async (guide) => {
        try {
          return await this.start(job, signal, started, promptIds, whole, guide);
        } finally {
          guide.close();
        }
      }) ?? Promise.reject(new FerryError("INVALID_INPUT", "guided decoding is off on this worker"))
    );
  }

  private start(
    job: GenerateJob,
    signal: AbortSignal,
    {
      emit,
      resume,
      onAdmitted,
      priority,
    }: SubmitOptions & { emit: (events: JobEventBody[]) => void },
    promptIds: number[],
    whole: number[],
    guide: GrammarGuide | undefined,
  ): Promise<CompletionResult> {
    return new Promise((resolve, reject) => {
      const seq = new Sequence({
        id: this.nextSeq++,
        promptIds,
        params: job.params,
        ...(priority === undefined ? {} : { priority }),
        deadline: job.deadline,
        signal,
        random: seededRandom(job.params.seed ?? randomInt(2 ** 31)),
        // the prompt as context: a SentencePiece tokenizer's first generated token keeps its
        // leading space (after "Once upon a", " time", not "time"), as vLLM's detokenizer does
        decoder: this.tokenizer.decoder(promptIds),
        output: new OutputProcessor(job.params.stop, job.params.include_stop_str_in_output),
        badWordIds: badWordIds(job.params.bad_words ?? [], this.tokenizer),
        ...(job.params.allowed_token_ids
          ? { allowed: bitmaskOf(job.params.allowed_token_ids, this.vocabularySize()) }
          : {}),
        ...(guide ? { guide } : {}),
        // the client's own text, else the ids the model read as text
        ...(job.params.echo
          ? { echo: job.prompt_ids || promptIds !== whole ? this.textOf(promptIds) : job.prompt }
          : {}),
        emit,
        resolve,
        reject,
        ...(onAdmitted ? { onAdmitted } : {}),
      });
      if (resume && resume.ids.length > 0) {
        this.metrics.resumed.inc();
        if (this.replay(seq, resume)) return;
      }
      // a replayed sequence's guide took its tokens: its prefill waits for their mask
      void (guide?.whenReady() ?? Promise.resolve()).then(() => {
        this.scheduler.add(seq);
        this.kick();
      });
    });
  }

  /**
   * What a guided completion must spell, and over which vocabulary; a FerryError where it
   * cannot be guided here. Guides spell text token by token, so they need every token's
   * bytes (a tokenizer whose tokens' bytes are known), the vocabulary's size and an end of text. The spec is
   * checked again (the API checked it before queueing): a job may come from an older API.
   */
  private guideOf(
    params: SamplingParams,
  ):
    | { spec: NonNullable<ReturnType<typeof guidedSpecOf>>; vocabulary: number }
    | FerryError
    | undefined {
    const spec = guidedSpecOf(params);
    if (!spec) return undefined;
    const size = this.options.vocabSize;
    if (
      size === undefined ||
      !this.tokenizer.exactTokenBytes ||
      this.tokenizer.eosTokenId === undefined ||
      !this.grammars
    )
      return new FerryError(
        "INVALID_INPUT",
        `guided decoding (${spec.kind}) needs a tokenizer whose every token's bytes are known, an end-of-text token and the model's vocab_size in model.json`,
      );
    const problem = guidedProblem(spec);
    if (problem) return new FerryError("INVALID_INPUT", `${spec.kind}: ${problem}`);
    return { spec, vocabulary: this.grammars.vocabulary(this.tokenizer, size) };
  }

  /** Logits per position: the model's vocabulary, else the tokenizer's ids below the end of text. */
  private vocabularySize(): number {
    return this.options.vocabSize ?? (this.tokenizer.eosTokenId ?? 0) + 1;
  }

  /**
   * Brings a fresh sequence to where an earlier attempt's last token event left it: same
   * detokenizer and stop-string state, same random draws used (one per sampled token). Its
   * prefill then covers prompt and replayed tokens. True when it is already finished.
   */
  private replay(seq: Sequence, { ids, logprobs }: ResumePoint): boolean {
    for (const [i, id] of ids.entries()) seq.replay(id, logprobs[i]);
    const reason = seq.finishedBy(this.options.contextLength);
    if (reason) this.finish(seq, reason);
    return reason !== undefined;
  }

  /** Resolves once no sequence waits or runs (for a swap or a drain). */
  async whenIdle(): Promise<void> {
    while (this.scheduler.hasWork) await new Promise((r) => setTimeout(r, 20));
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
      this.dropDead(this.scheduler.all());
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
        this.advanceAll(
          prefill,
          await this.timed(prefill.length, () =>
            this.runtime.prefillScored(prefill.map((s) => s.prefillRow())),
          ),
          prefill.length,
        );
      if (decode.length > 0)
        this.advanceAll(
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
      this.advanceAll([...prefill, ...decode], scores, prefill.length);
    });
  }

  private async stepPlanned(
    run: (prefill: Sequence[], decode: Sequence[]) => Promise<void>,
  ): Promise<boolean> {
    const plan = this.scheduler.schedule();
    this.dropCaches(plan.preempted);
    this.observeQueue();
    if (plan.prefill.length === 0 && plan.decode.length === 0) return this.idle();
    const now = performance.now();
    for (const seq of plan.prefill) seq.admitted(now);
    try {
      await run(plan.prefill, plan.decode);
    } catch (err) {
      for (const seq of [...plan.prefill, ...plan.decode]) this.fail(seq, modelError(err));
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
    if (decode.length > 0 && !this.batchYields(decode)) {
      this.stepping = true;
      try {
        this.advanceAll(
          decode,
          await this.timed(decode.length, () =>
            this.runtime.stepScored(decode.map((s) => s.decodeRow())),
          ),
        );
      } catch (err) {
        for (const seq of decode) this.fail(seq, modelError(err));
      } finally {
        this.stepping = false;
      }
      return true;
    }
    if (this.prefilling.size > 0) {
      // lines yielding to a prompt step again when it returns, or when their wait runs out
      const yielding = decode.length > 0 && this.yieldingSince !== undefined;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (yielding)
          timer = setTimeout(
            resolve,
            Math.max(0, (this.yieldingSince ?? 0) + MAX_YIELD_MS - performance.now()),
          );
      });
      clearTimeout(timer);
      return true;
    }
    return this.idle();
  }

  /**
   * Whether a step of offline batches' lines alone waits for an interactive prompt in flight on
   * the prefill thread: the step would take the core that prompt runs on, and the prompt's end
   * is the request's first token. The lines lose a step's time per interactive request.
   */
  private batchYields(decode: readonly Sequence[]): boolean {
    const urgent =
      decode.every((s) => s.band === BATCH_BAND) &&
      [...this.prefilling].some((s) => s.band < BATCH_BAND);
    if (!urgent) {
      this.yieldingSince = undefined;
      return false;
    }
    // prompts that end at their first token (max_tokens 1) never decode: a steady stream of
    // them must not stop the lines for good, so they yield for a while at a time
    const now = performance.now();
    this.yieldingSince ??= now;
    if (now - this.yieldingSince < MAX_YIELD_MS) return true;
    this.yieldingSince = undefined;
    return false;
  }

  /**
   * Seats waiting sequences and starts their prefill without waiting for it (on the prefill
   * thread while the decode thread is busy, else on the decode thread): the first token is
   * sampled (and sent) the moment the prompt has run, and the sequence decodes from the next
   * step on.
   */
  private admitNow(): void {
    this.dropDead(this.scheduler.queued());
    // with no decode step in flight or about to be sent, the decode thread is free and warm
    const decoderBusy = this.stepping || this.scheduler.decodable().length > 0;
    // a decode step in flight holds its sequences' rows: they give seats up between steps only
    if (!this.stepping) this.dropCaches(this.scheduler.preempt());
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
          this.countPrefixes(joining, cached);
          // a sequence cancelled meanwhile kept its cache until now; it goes with it
          const gone = joining.filter((s) => !this.scheduler.holds(s));
          this.runtime.release(gone.map((s) => s.id));
          this.takeScores(joining, prompts);
          joining.forEach((seq, i) => {
            if (this.scheduler.holds(seq)) this.advance(seq, logits[i]);
          });
        },
        (err: unknown) => {
          for (const seq of joining) this.prefilling.delete(seq);
          for (const seq of joining) if (this.scheduler.holds(seq)) this.fail(seq, modelError(err));
        },
      )
      .finally(() => {
        const wake = this.wake;
        this.wake = undefined;
        wake?.();
        this.kick();
      });
  }

  /** Frees preempted sequences' caches: they are computed again when they rejoin. */
  private dropCaches(preempted: readonly Sequence[]): void {
    if (preempted.length === 0) return;
    this.metrics.preempted.inc(preempted.length);
    this.runtime.release(preempted.map((s) => s.id));
  }

  /** A step's outputs, its first `prefills` rows the sequences' prefills. */
  private advanceAll(seqs: Sequence[], { logits, prompts, cached }: LmOutput, prefills = 0): void {
    this.countPrefixes(seqs.slice(0, prefills), cached);
    this.takeScores(seqs, prompts);
    for (const [i, seq] of seqs.entries()) this.advance(seq, logits[i]);
  }

  /**
   * What the prefix cache gave prefills (vLLM's queries and hits, in tokens): every prefill
   * row asked the cache but a scored one.
   */
  private countPrefixes(prefilled: readonly Sequence[], cached: readonly number[]): void {
    if (!this.options.prefixCaching) return;
    prefilled.forEach((seq, i) => {
      const row = seq.prefillRow();
      if (row.scorePrompt) return;
      this.metrics.prefixQueries.inc(row.tokens.length);
      this.metrics.prefixHits.inc(cached[i] ?? 0);
      // a resumed sequence's prefill reads its earlier tokens too: only the prompt's count
      // a preempted sequence's recompute says nothing of what its prompt found first
      if (seq.preemptions === 0) seq.cachedTokens = Math.min(cached[i] ?? 0, seq.promptIds.length);
    });
  }

  /** Prompt scores of a prefill, as its sequences report them (before their first token). */
  private takeScores(seqs: readonly Sequence[], prompts: readonly PromptScores[]): void {
    if (prompts.length === 0) return;
    const bySeq = new Map(prompts.map((scores) => [scores.seq, scores]));
    for (const seq of seqs) {
      const scores = bySeq.get(seq.id);
      if (scores) seq.promptLogprobs = promptLogprobs(seq.promptIds, scores, this.tokenizer);
    }
  }

  /** Token ids as text, whole (an echoed prompt). */
  private textOf(ids: readonly number[]): string {
    const decoder = this.tokenizer.decoder();
    return ids.map((id) => decoder.push(id)).join("") + decoder.flush();
  }

  /** Samples the sequence's next token and applies the stop rules. */
  private advance(seq: Sequence, logits: Float32Array | undefined): void {
    if (!logits) return;
    const guideError = seq.guide?.error;
    if (guideError) {
      this.fail(seq, guideError);
      return;
    }
    const { logprobs } = seq.params;
    const changes = changesLogits(seq.params, seq);
    // log probabilities are the model's own, before penalties and bias change the logits
    const raw = logprobs !== undefined && changes ? logits.slice() : logits;
    if (changes) processLogits(logits, seq.params, seq, this.tokenizer.eosTokenId);
    const token = sample(logits, seq.params, seq.random);
    const { ttftS, interTokenS } = seq.timeToken(performance.now());
    if (ttftS !== undefined) this.metrics.ttft.observe(ttftS);
    if (interTokenS !== undefined) this.metrics.interToken.observe(interTokenS);
    if (token === this.tokenizer.eosTokenId && !seq.params.ignore_eos) {
      this.finish(seq, "stop");
      return;
    }
    seq.accept(
      token,
      logprobs === undefined ? undefined : tokenLogprob(raw, token, logprobs, this.tokenizer),
    );
    this.metrics.tokens.inc();
    const reason = seq.finishedBy(this.options.contextLength);
    if (reason) this.finish(seq, reason);
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    // what it read and wrote may begin its conversation's next turn
    if (this.options.prefixCacheCompletions && !this.prefilling.has(seq))
      void this.runtime.retain(seq.id, [...seq.promptIds, ...seq.generated]);
    this.leave(seq);
    this.count(seq, false);
    seq.finish(reason);
  }

  private fail(seq: Sequence, error: FerryError): void {
    this.leave(seq);
    // a cancel is the client's leaving, not the model's failing
    if (error.code !== "CANCELLED") this.count(seq, true);
    seq.fail(error);
  }

  /** A sequence's end in the version's statistics: its wait for a seat, its whole time here. */
  private count(seq: Sequence, failed: boolean): void {
    const now = performance.now();
    this.metrics.finished((seq.startedAt ?? now) - seq.enqueuedAt, now - seq.enqueuedAt, failed);
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

  private leave(seq: Sequence): void {
    this.scheduler.remove(seq);
    // a prefill in flight would bring the cache back after a release; it is released on return
    if (!this.prefilling.has(seq)) this.runtime.release([seq.id]);
  }

  /**
   * Cancelled sequences leave now; waiting ones past their deadline are never started. Only
   * between decode steps for running ones: a step in flight still holds their rows.
   */
  private dropDead(seqs: Sequence[]): void {
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
}

function modelError(err: unknown): FerryError {
  return new FerryError("MODEL_ERROR", err instanceof Error ? err.message : String(err));
}
