import type { Tokenizer } from "@ferry/model-repository";
import { FerryError, type FinishReason } from "@ferry/protocol";
import type { PromptScores } from "@ferry/runtime";
import type { GenerationMetrics } from "./generation-metrics.js";
import { changesLogits, processLogits } from "./logits-processors.js";
import { promptLogprobs, tokenLogprob } from "./logprobs.js";
import { sample } from "./sampler.js";
import type { Sequence } from "./sequence.js";

/** What turning a pass's outputs into tokens needs of the model it ran. */
export interface PassContext {
  tokenizer: Tokenizer;
  metrics: GenerationMetrics;
  /** Positions the model can attend to (prompt + completion). */
  contextLength: number;
}

/**
 * The last stage of a step (vLLM's output processing): one sequence's logits become its next
 * token (penalties, bias and masks applied, sampled with its own random draws, timed, stop
 * rules checked). Returns why the sequence ends here, or the error it ends with; undefined
 * while it goes on.
 */
export function nextToken(
  seq: Sequence,
  logits: Float32Array,
  { tokenizer, metrics, contextLength }: PassContext,
): FinishReason | FerryError | undefined {
  const guideError = seq.guide?.error;
  if (guideError) return guideError;
  const { logprobs } = seq.params;
  const changes = changesLogits(seq.params, seq);
  // log probabilities are the model's own, before penalties and bias change the logits
  const raw = logprobs !== undefined && changes ? logits.slice() : logits;
  let token: number;
  try {
    if (changes) processLogits(logits, seq.params, seq, tokenizer.eosTokenId);
    token = sample(logits, seq.params, seq.random);
    // drawn where every logit was barred (the sampler's fallback): the request's constraints
    // together leave no token, and an answer made anyway breaks them (an empty "stop" where
    // a JSON schema was asked for, a text that is none of the choices)
    if (changes && logits[token] === Number.NEGATIVE_INFINITY)
      return new FerryError(
        "INVALID_INPUT",
        `no token can follow ${seq.generated.length} generated: allowed_token_ids, bad_words, min_tokens, stop_token_ids and the guided format together leave none`,
      );
  } catch (err) {
    // the error it ends with, this sequence alone (a guide's mask it cannot give, say): thrown,
    // it left a step's callback, and the engine spun on a sequence it could not advance
    return new FerryError("MODEL_ERROR", err instanceof Error ? err.message : String(err));
  }
  const { ttftS, interTokenS } = seq.timeToken(performance.now());
  if (ttftS !== undefined) metrics.ttft.observe(ttftS);
  if (interTokenS !== undefined) metrics.interToken.observe(interTokenS);
  if (token === tokenizer.eosTokenId && !seq.params.ignore_eos) return "stop";
  seq.accept(
    token,
    logprobs === undefined ? undefined : tokenLogprob(raw, token, logprobs, tokenizer),
  );
  metrics.tokens.inc();
  return seq.finishedBy(contextLength);
}

/** Prompt scores of a prefill, as its sequences report them (before their first token). */
export function takePromptScores(
  seqs: readonly Sequence[],
  prompts: readonly PromptScores[],
  tokenizer: Tokenizer,
): void {
  if (prompts.length === 0) return;
  const bySeq = new Map(prompts.map((scores) => [scores.seq, scores]));
  for (const seq of seqs) {
    const scores = bySeq.get(seq.id);
    if (scores) seq.promptLogprobs = promptLogprobs(seq.promptIds, scores, tokenizer);
  }
}

/**
 * What the prefix cache gave prefills (vLLM's queries and hits, in tokens): every prefill
 * row asked the cache but a scored one.
 */
export function countPrefixHits(
  prefilled: readonly Sequence[],
  cached: readonly number[],
  metrics: GenerationMetrics,
): void {
  prefilled.forEach((seq, i) => {
    const row = seq.prefillRow();
    if (row.scorePrompt) return;
    metrics.prefixQueries.inc(row.tokens.length);
    metrics.prefixHits.inc(cached[i] ?? 0);
    // a resumed sequence's prefill reads its earlier tokens too: only the prompt's count
    // a preempted sequence's recompute says nothing of what its prompt found first
    if (seq.preemptions === 0) seq.cachedTokens = Math.min(cached[i] ?? 0, seq.promptIds.length);
  });
}
