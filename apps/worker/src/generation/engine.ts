import { randomInt } from "node:crypto";
import type { Tokenizer } from "@ferry/model-repository";
import {
  type CompletionResult,
  FerryError,
  type FinishReason,
  type GenerateJob,
  type JobEventBody,
} from "@ferry/protocol";
import type { LmRuntime } from "@ferry/runtime";
import type { GenerationMetrics } from "./generation-metrics.js";
import { OutputProcessor } from "./output-processor.js";
import { sample, seededRandom } from "./sampler.js";
import type { Scheduler } from "./scheduler.js";
import { decodeStepRow, prefillStepRow, type Sequence } from "./sequence.js";

export interface EngineOptions {
  /** Positions the model can attend to (prompt + completion). */
  contextLength: number;
  /** Prefill joining sequences in the same pass as the decode (false: a pass of its own). */
  mixedPrefill?: boolean;
  /**
   * The runtime prefills on a thread of its own: joiners are admitted the moment they arrive
   * and their prompts run while the decode step in flight goes on, instead of after it.
   */
  prefillThread?: boolean;
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
  /** Wakes a loop that has nothing to decode until a prefill returns. */
  private wake: (() => void) | undefined;
  /** A decode step is in flight. */
  private stepping = false;

  constructor(
    private readonly runtime: LmRuntime,
    private readonly scheduler: Scheduler,
    private readonly tokenizer: Tokenizer,
    private readonly metrics: GenerationMetrics,
    private readonly options: EngineOptions,
  ) {}

  /**
   * Adds a completion; resolves with its result once it finishes. `resume`: the token ids an
   * earlier attempt already sent (a job taken over from a worker that died); the sequence
   * continues after them, as if it had never stopped, and sends none of their text again.
   */
  submit(
    job: GenerateJob,
    signal: AbortSignal,
    emit: (events: JobEventBody[]) => void,
    resume: readonly number[] = [],
  ): Promise<CompletionResult> {
    const promptIds = this.tokenizer.encode(job.prompt);
    if (promptIds.length === 0)
      return Promise.reject(new FerryError("INVALID_INPUT", "prompt is empty"));
    if (promptIds.length >= this.options.contextLength) {
      const message = `This model's maximum context length is ${this.options.contextLength} tokens; the prompt has ${promptIds.length}`;
      return Promise.reject(new FerryError("INVALID_INPUT", message));
    }
    return new Promise((resolve, reject) => {
      const seq: Sequence = {
        id: this.nextSeq++,
        promptIds,
        params: job.params,
        deadline: job.deadline,
        signal,
        random: seededRandom(job.params.seed ?? randomInt(2 ** 31)),
        decoder: this.tokenizer.decoder(),
        output: new OutputProcessor(job.params.stop),
        generated: [],
        unsent: [],
        pending: undefined,
        enqueuedAt: performance.now(),
        startedAt: undefined,
        lastTokenAt: undefined,
        ttftMs: undefined,
        emit,
        resolve,
        reject,
      };
      if (resume.length > 0) {
        this.metrics.resumed.inc();
        if (this.replay(seq, resume)) return;
      }
      this.scheduler.add(seq);
      this.kick();
    });
  }

  /**
   * Brings a fresh sequence to where an earlier attempt's last token event left it: same
   * detokenizer and stop-string state, same random draws used (one per sampled token). Its
   * prefill then covers prompt and replayed tokens. True when it is already finished.
   */
  private replay(seq: Sequence, ids: readonly number[]): boolean {
    for (const id of ids) {
      seq.generated.push(id);
      seq.output.push(seq.decoder.push(id));
      if (seq.params.temperature > 0) seq.random();
    }
    const reason = this.finishedBy(seq);
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
      if (this.options.prefillThread) {
        if (!(await this.decodeOnce())) break;
        continue;
      }
      const plan = this.scheduler.schedule();
      this.metrics.running.set(this.scheduler.numRunning);
      this.metrics.waiting.set(this.scheduler.numWaiting);
      if (plan.prefill.length === 0 && plan.decode.length === 0) {
        const wait = this.scheduler.staticWaitLeft();
        if (wait === 0) break;
        await new Promise((resolve) => setTimeout(resolve, wait));
        continue;
      }
      const now = performance.now();
      for (const seq of plan.prefill) seq.startedAt = now;
      try {
        await this.execute(plan.prefill, plan.decode);
      } catch (err) {
        for (const seq of [...plan.prefill, ...plan.decode]) this.fail(seq, modelError(err));
      }
    }
    this.metrics.running.set(0);
    this.metrics.waiting.set(this.scheduler.numWaiting);
  }

  /**
   * With a prefill thread: admits joiners (their prefill starts at once), then runs one decode
   * step over every sequence that has its first token, or waits for a prefill to return.
   * False when there is nothing left to do.
   */
  private async decodeOnce(): Promise<boolean> {
    this.admitNow();
    const decode = this.scheduler.decodable();
    this.metrics.running.set(this.scheduler.numRunning);
    this.metrics.waiting.set(this.scheduler.numWaiting);
    if (decode.length > 0) {
      this.stepping = true;
      try {
        const logits = await this.runtime.step(decode.map(decodeStepRow));
        this.advanceAll(decode, logits);
      } catch (err) {
        for (const seq of decode) this.fail(seq, modelError(err));
      } finally {
        this.stepping = false;
      }
      return true;
    }
    if (this.prefilling.size > 0) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      return true;
    }
    const wait = this.scheduler.staticWaitLeft();
    if (wait === 0) return false;
    await new Promise((resolve) => setTimeout(resolve, wait));
    return true;
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
    const joining = this.scheduler.admit();
    if (joining.length === 0) return;
    const now = performance.now();
    for (const seq of joining) {
      seq.startedAt = now;
      this.prefilling.add(seq);
    }
    this.runtime
      .prefill(joining.map(prefillStepRow), decoderBusy)
      .then(
        (logits) => {
          for (const seq of joining) this.prefilling.delete(seq);
          // a sequence cancelled meanwhile kept its cache until now; it goes with it
          const gone = joining.filter((s) => !this.scheduler.holds(s));
          this.runtime.release(gone.map((s) => s.id));
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

  private async execute(prefill: Sequence[], decode: Sequence[]): Promise<void> {
    const prefillRows = prefill.map(prefillStepRow);
    const decodeRows = decode.map(decodeStepRow);
    if (this.options.mixedPrefill) {
      const logits = await this.runtime.step([...prefillRows, ...decodeRows]);
      this.advanceAll([...prefill, ...decode], logits);
      return;
    }
    if (prefillRows.length > 0) {
      const logits = await this.runtime.prefill(prefillRows);
      this.advanceAll(prefill, logits);
    }
    if (decodeRows.length > 0) {
      const logits = await this.runtime.step(decodeRows);
      this.advanceAll(decode, logits);
    }
  }

  private advanceAll(seqs: Sequence[], logits: Float32Array[]): void {
    for (const [i, seq] of seqs.entries()) this.advance(seq, logits[i]);
  }

  /** Samples the sequence's next token and applies the stop rules. */
  private advance(seq: Sequence, logits: Float32Array | undefined): void {
    if (!logits) return;
    const now = performance.now();
    const token = sample(logits, seq.params, seq.random);
    if (seq.ttftMs === undefined) {
      seq.ttftMs = now - (seq.startedAt ?? now);
      this.metrics.ttft.observe((now - seq.enqueuedAt) / 1000);
    } else if (seq.lastTokenAt !== undefined) {
      this.metrics.interToken.observe((now - seq.lastTokenAt) / 1000);
    }
    seq.lastTokenAt = now;
    if (token === this.tokenizer.eosTokenId && !seq.params.ignore_eos) {
      this.finish(seq, "stop");
      return;
    }
    seq.generated.push(token);
    seq.unsent.push(token);
    this.metrics.tokens.inc();
    const text = seq.output.push(seq.decoder.push(token));
    if (text) this.send(seq, text);
    const reason = this.finishedBy(seq);
    if (reason) this.finish(seq, reason);
    else seq.pending = token;
  }

  private finishedBy(seq: Sequence): FinishReason | undefined {
    if (seq.output.finished) return seq.output.finished;
    if (seq.generated.length >= seq.params.max_tokens) return "length";
    if (seq.promptIds.length + seq.generated.length >= this.options.contextLength) return "length";
    return undefined;
  }

  /** A token event: the text now safe to show, with every id sampled since the last one. */
  private send(seq: Sequence, text: string): void {
    seq.emit([{ type: "token", text, index: 0, ids: seq.unsent }]);
    seq.unsent = [];
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    const tail = seq.output.finished
      ? ""
      : seq.output.push(seq.decoder.flush()) + seq.output.finish(reason);
    if (tail) this.send(seq, tail);
    this.leave(seq);
    const completion = seq.generated.length;
    seq.resolve({
      text: seq.output.text,
      finish_reason: seq.output.finished ?? reason,
      usage: {
        prompt_tokens: seq.promptIds.length,
        completion_tokens: completion,
        total_tokens: seq.promptIds.length + completion,
      },
      ttft_ms: seq.ttftMs ?? 0,
    });
  }

  private fail(seq: Sequence, error: FerryError): void {
    this.leave(seq);
    seq.reject(error);
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
