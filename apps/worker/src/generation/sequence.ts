import type { GrammarGuide } from "@ferry/guided/engine";
import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  type FinishReason,
  type JobEventBody,
  type PromptTokenLogprob,
  priorityBand,
  type SamplingParams,
  type TokenLogprob,
} from "@ferry/protocol";
import type { StepRow } from "@ferry/runtime";
import { readsTokenCounts } from "./logits-processors.js";
import type { OutputProcessor } from "./output-processor.js";

export type { FinishReason };

/** What a sequence is made of when its completion is submitted. */
export interface SequenceInit {
  id: number;
  promptIds: number[];
  params: SamplingParams;
  /** Its request's priority, 1 (lowest: offline batches) to 10. @defaultValue 5 */
  priority?: number;
  /** Epoch ms after which it must not start. */
  deadline: number;
  signal: AbortSignal;
  random: () => number;
  decoder: { push(id: number): string; flush(): string };
  output: OutputProcessor;
  /** vLLM's `bad_words` as token id sequences. */
  badWordIds?: number[][];
  /** Guided decoding (vLLM's `guided_choice`, JSON mode), following the tokens drawn. */
  guide?: GrammarGuide;
  /** `allowed_token_ids` as a bitmask (see `bitmaskOf`). */
  allowed?: Uint32Array;
  /** The prompt's text, when the completion echoes it (it opens the first token event). */
  echo?: string;
  emit: (events: JobEventBody[]) => void;
  resolve: (result: CompletionResult) => void;
  reject: (err: Error) => void;
  /** Called once when it leaves the waiting queue for its prefill (its trace's `prefill`). */
  onAdmitted?: () => void;
}

/** Token timings to observe: the first token's latency since submission, or the gap since the last. */
export interface TokenTiming {
  ttftS?: number;
  interTokenS?: number;
}

/**
 * One completion from submission to its last token. It keeps its own bookkeeping (tokens,
 * what is not sent yet, detokenizer and stop state, timings); the engine decides when it
 * runs, samples its tokens, and tells it when it is done.
 */
export class Sequence {
  readonly id: number;
  readonly promptIds: number[];
  readonly params: SamplingParams;
  /** Its priority's band (0 first, 2 offline batches'): the order seats go in. */
  readonly band: number;
  readonly deadline: number;
  readonly signal: AbortSignal;
  readonly random: () => number;
  /** Completion token ids so far. */
  readonly generated: number[] = [];
  readonly badWordIds: readonly number[][];
  readonly guide: GrammarGuide | undefined;
  /** `allowed_token_ids` as a bitmask over the vocabulary, built once. */
  readonly allowed: Uint32Array | undefined;
  /** How often each completion token appears (kept only for the penalties that read it). */
  readonly outputCounts = new Map<number, number>();
  private readonly counting: boolean;
  /** Each completion token's log probability, when the job asked for them. */
  readonly logprobs: TokenLogprob[] = [];
  /** Each prompt token's, once its prefill has run, when the job asked for them. */
  promptLogprobs: PromptTokenLogprob[] | undefined;
  /** Its prompt's tokens whose cache its prefill took from the prefix cache. */
  cachedTokens = 0;
  /** The echoed prompt's text while no token event has carried it yet. */
  private unsentEcho: string | undefined;
  /** The token sampled last step, fed to the model this step. */
  pending: number | undefined;
  readonly enqueuedAt = performance.now();
  /** When its prefill began (it was admitted); undefined while it waits. */
  startedAt: number | undefined;
  /** Times it gave its seat up to a higher band (its cache freed, recomputed when it rejoins). */
  preemptions = 0;
  private ttftMs: number | undefined;
  private lastTokenAt: number | undefined;
  /** Ids sampled since the last token event went out (they travel with the next one). */
  private unsent: number[] = [];
  /** Their log probabilities, when asked for. */
  private unsentLogprobs: TokenLogprob[] = [];
  private readonly init: SequenceInit;

  constructor(init: SequenceInit) {
    this.init = init;
    this.id = init.id;
    this.promptIds = init.promptIds;
    this.params = init.params;
    this.band = priorityBand(init.priority ?? DEFAULT_PRIORITY);
    this.deadline = init.deadline;
    this.signal = init.signal;
    this.random = init.random;
    this.unsentEcho = init.echo;
    this.counting = readsTokenCounts(init.params);
    this.badWordIds = init.badWordIds ?? [];
    this.guide = init.guide;
    this.allowed = init.allowed;
  }

  /** It leaves the waiting queue now: its prefill begins (again, after a preemption). */
  admitted(now: number): void {
    if (this.startedAt !== undefined) return;
    this.startedAt = now;
    this.init.onAdmitted?.();
  }

  /**
   * It gives its seat up (vLLM's recompute preemption): its cache is freed, and when it
   * rejoins, its prefill reads prompt and completion so far and it samples on from there.
   */
  preempted(): void {
    this.pending = undefined;
    this.preemptions++;
  }

  /** What a joining sequence prefills: its prompt, and any completion it resumes. */
  prefillIds(): number[] {
    return this.generated.length === 0 ? this.promptIds : [...this.promptIds, ...this.generated];
  }

  /** Its row of a prefill pass. */
  prefillRow(): StepRow {
    const top = this.params.prompt_logprobs;
    return {
      seq: this.id,
      tokens: this.prefillIds(),
      ...(top === undefined ? {} : { scorePrompt: { length: this.promptIds.length, top } }),
    };
  }

  /** Its row of a decode step: the token it sampled last. */
  decodeRow(): StepRow {
    return { seq: this.id, tokens: [this.pending ?? 0] };
  }

  /** Notes that a token was sampled `now`; returns the timings to observe. */
  timeToken(now: number): TokenTiming {
    const last = this.lastTokenAt;
    this.lastTokenAt = now;
    if (this.ttftMs === undefined) {
      this.ttftMs = now - (this.startedAt ?? now);
      return { ttftS: (now - this.enqueuedAt) / 1000 };
    }
    return last === undefined ? {} : { interTokenS: (now - last) / 1000 };
  }

  /** Takes a sampled token (not the end of text) and sends the text it completes, if any. */
  accept(token: number, logprob?: TokenLogprob): void {
    this.took(token, logprob);
    this.unsent.push(token);
    if (logprob) this.unsentLogprobs.push(logprob);
    const text = this.init.output.push(this.init.decoder.push(token), this.stopsApply());
    if (text) this.send(text);
    this.pending = token;
  }

  /**
   * Takes a token an earlier attempt already sent: the detokenizer, stop rules and random
   * draws move on exactly as they did then, and nothing is sent again.
   */
  replay(token: number, logprob?: TokenLogprob): void {
    this.took(token, logprob);
    // the earlier attempt's first token event carried the echo
    this.unsentEcho = undefined;
    this.init.output.push(this.init.decoder.push(token), this.stopsApply());
    if (this.params.temperature > 0) this.random();
  }

  /** Whether stop strings may end it yet: not before `min_tokens` (vLLM's rule). */
  private stopsApply(): boolean {
    return this.generated.length >= (this.params.min_tokens ?? 0);
  }

  private took(token: number, logprob: TokenLogprob | undefined): void {
    this.generated.push(token);
    this.guide?.advance(token);
    if (logprob) this.logprobs.push(logprob);
    if (this.counting) this.outputCounts.set(token, (this.outputCounts.get(token) ?? 0) + 1);
  }

  /** Why it is done now (a stop string, max_tokens, the context window), if it is. */
  finishedBy(contextLength: number): FinishReason | undefined {
    if (this.init.output.finished) return this.init.output.finished;
    // vLLM's stop_token_ids: the token itself stays in the completion (it is not the end of
    // text), and a resumed completion that ended on one is over too
    const last = this.generated.at(-1);
    if (last !== undefined && this.params.stop_token_ids?.includes(last)) return "stop";
    if (this.generated.length >= this.params.max_tokens) return "length";
    if (this.promptIds.length + this.generated.length >= contextLength) return "length";
    return undefined;
  }

  /** Sends what the detokenizer and stop rules still hold, and resolves with the completion. */
  finish(reason: FinishReason): void {
    const output = this.init.output;
    const tail = output.finished
      ? ""
      : output.push(this.init.decoder.flush()) + output.finish(reason);
    if (tail || this.unsentEcho !== undefined) this.send(tail);
    const completion = this.generated.length;
    this.init.resolve({
      text: (this.init.echo ?? "") + output.text,
      finish_reason: output.finished ?? reason,
      usage: {
        prompt_tokens: this.promptIds.length,
        completion_tokens: completion,
        total_tokens: this.promptIds.length + completion,
        prompt_tokens_details: { cached_tokens: this.cachedTokens },
      },
      ttft_ms: this.ttftMs ?? 0,
      ...(this.params.logprobs === undefined ? {} : { logprobs: this.logprobs }),
      ...(this.promptLogprobs ? { prompt_logprobs: this.promptLogprobs } : {}),
    });
  }

  fail(error: Error): void {
    this.init.reject(error);
  }

  /** A token event: the text now safe to show, with every id sampled since the last one. */
  private send(text: string): void {
    const logprobs = this.params.logprobs === undefined ? {} : { logprobs: this.unsentLogprobs };
    const echo = this.unsentEcho;
    this.unsentEcho = undefined;
    const event: JobEventBody = {
      type: "token",
      text: (echo ?? "") + text,
      index: 0,
      ids: this.unsent,
      ...logprobs,
      ...(echo !== undefined && this.promptLogprobs
        ? { prompt_logprobs: this.promptLogprobs }
        : {}),
    };
    this.init.emit([event]);
    this.unsent = [];
    this.unsentLogprobs = [];
  }
}
