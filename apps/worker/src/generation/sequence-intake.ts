import { randomInt } from "node:crypto";
import { guidedProblem, guidedSpecOf } from "@ferry/guided";
import { bitmaskOf, type GrammarEngine, type GrammarGuide } from "@ferry/guided/engine";
import type { Tokenizer } from "@ferry/model-repository";
import {
  type CompletionResult,
  FerryError,
  type GenerateJob,
  type JobEventBody,
  outOfVocabulary,
  type SamplingParams,
  unknownSamplingFields,
} from "@ferry/protocol";
import { badWordIds } from "./logits-processors.js";
import { OutputProcessor } from "./output-processor.js";
import { seededRandom } from "./sampler.js";
import { Sequence } from "./sequence.js";

/** What the intake needs to know of the model. */
export interface IntakeLimits {
  /** Positions the model can attend to (prompt + completion). */
  contextLength: number;
  /** Token ids the model knows (its logits' width). */
  vocabSize?: number | undefined;
}

/** A job's prompt as the model reads it, and the ids it was cut from. */
export interface Prompt {
  promptIds: number[];
  whole: number[];
}

/** A guided completion's spec and the vocabulary its masks cover. */
export interface Guided {
  spec: NonNullable<ReturnType<typeof guidedSpecOf>>;
  vocabulary: number;
}

/** What a sequence reports to, beside its job. */
export interface SequenceHooks {
  emit: (events: JobEventBody[]) => void;
  resolve: (result: CompletionResult) => void;
  reject: (err: Error) => void;
  onAdmitted?: (() => void) | undefined;
  priority?: number | undefined;
}

/**
 * A completion job becomes a sequence here: its sampling fields checked, its prompt
 * tokenized and cut (vLLM's truncate_prompt_tokens) and held against the model's vocabulary
 * and context, its guided spec checked, and the sequence built with its decoder, stop rules,
 * token masks and seeded random draws. Everything a job can be refused for is refused here,
 * before it takes a seat in the step loop.
 */
export class SequenceIntake {
  private nextSeq = 1;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly limits: IntakeLimits,
    private readonly grammars?: GrammarEngine,
  ) {}

  /** The job's prompt as the model reads it, or why the job cannot run here. */
  prompt(job: GenerateJob): Prompt | FerryError {
    const unknownFields = unknownSamplingFields(job.params);
    if (unknownFields.length > 0)
      return new FerryError(
        "INVALID_INPUT",
        `This worker does not know the sampling field(s) ${unknownFields.join(", ")}: is the API newer than its workers?`,
      );
    const whole =
      job.prompt_ids ?? this.tokenizer.encode(job.prompt, job.params.add_special_tokens ?? false);
    // vLLM's truncate_prompt_tokens: the last ones are read
    const keep = job.params.truncate_prompt_tokens;
    const promptIds = keep !== undefined && whole.length > keep ? whole.slice(-keep) : whole;
    if (promptIds.length === 0) return new FerryError("INVALID_INPUT", "prompt is empty");
    const unknown = outOfVocabulary(promptIds, this.limits.vocabSize);
    if (unknown !== undefined)
      return new FerryError("INVALID_INPUT", `Token id ${unknown} is out of vocabulary`);
    if (promptIds.length >= this.limits.contextLength)
      return new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${this.limits.contextLength} tokens; the prompt has ${promptIds.length}`,
      );
    return { promptIds, whole };
  }

  /**
   * What a guided completion must spell, and over which vocabulary; a FerryError where it
   * cannot be guided here. Guides spell text token by token, so they need every token's
   * bytes (a tokenizer whose tokens' bytes are known), the vocabulary's size and an end of text. The spec is
   * checked again (the API checked it before queueing): a job may come from an older API.
   */
  guided(params: SamplingParams): Guided | FerryError | undefined {
    const spec = guidedSpecOf(params);
    if (!spec) return undefined;
    const size = this.limits.vocabSize;
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

  /** The job's sequence, ready to be scheduled (or replayed to where an earlier attempt was). */
  sequence(
    job: GenerateJob,
    signal: AbortSignal,
    { promptIds, whole }: Prompt,
    guide: GrammarGuide | undefined,
    { emit, resolve, reject, onAdmitted, priority }: SequenceHooks,
  ): Sequence {
    return new Sequence({
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
  }

  /** Logits per position: the model's vocabulary, else the tokenizer's ids below the end of text. */
  private vocabularySize(): number {
    return this.limits.vocabSize ?? (this.tokenizer.eosTokenId ?? 0) + 1;
  }

  /** Token ids as text, whole (an echoed prompt). */
  private textOf(ids: readonly number[]): string {
    const decoder = this.tokenizer.decoder();
    return ids.map((id) => decoder.push(id)).join("") + decoder.flush();
  }
}
