import { keepMasked } from "@ferry/guided/engine";
import { MAX_LOGIT_BIAS, type SamplingParams } from "@ferry/protocol";

type Penalties = Pick<
  SamplingParams,
  | "logit_bias"
  | "repetition_penalty"
  | "frequency_penalty"
  | "presence_penalty"
  | "min_tokens"
  | "stop_token_ids"
  | "allowed_token_ids"
>;

/** What a sequence has made so far, as the penalties read it. */
export interface TokenHistory {
  /** Each completion token id so far, with how often it appears. */
  outputCounts: ReadonlyMap<number, number>;
  /** The prompt's ids (the repetition penalty counts them too). */
  promptIds: readonly number[];
  /** Completion tokens so far. */
  generated: readonly number[];
  /** vLLM's `bad_words` as token id sequences (`badWordIds`). */
  badWordIds?: readonly (readonly number[])[];
  /** `allowed_token_ids` as a bitmask, built once per sequence (not re-read every token). */
  allowed?: Uint32Array | undefined;
  /** vLLM's guided decoding: leaves only the tokens its grammar allows next. */
  // structurally (guide.ts imports this module's mask)
  guide?: { mask(logits: Float32Array): void } | undefined;
}

/**
 * vLLM's `bad_words` as token id sequences: each word (leading whitespace stripped) as it
 * encodes alone, and with one leading space where that encodes to another sequence of the same
 * length (a tokenizer whose words carry their space): a word is barred at the start of the
 * text and inside it, as vLLM bars it.
 */
export function badWordIds(
  words: readonly string[],
  tokenizer: { encode(text: string): number[] },
): number[][] {
  const out: number[][] = [];
  for (const word of words) {
    const bare = tokenizer.encode(word.trimStart());
    if (bare.length === 0) continue;
    out.push(bare);
    const spaced = tokenizer.encode(` ${word.trimStart()}`);
    if (spaced.length === bare.length && spaced[0] !== bare[0]) out.push(spaced);
  }
  return out;
}

/** Whether `params` ask for penalties that read how often each token has appeared. */
export function readsTokenCounts(params: Penalties): boolean {
  return (
    (params.repetition_penalty ?? 1) !== 1 ||
    (params.frequency_penalty ?? 0) !== 0 ||
    (params.presence_penalty ?? 0) !== 0
  );
}

/** Whether `params` change the model's logits before this step's draw at all. */
export function changesLogits(params: Penalties, history: TokenHistory): boolean {
  return (
    (params.min_tokens ?? 0) > history.generated.length ||
    params.allowed_token_ids !== undefined ||
    history.guide !== undefined ||
    (history.badWordIds?.length ?? 0) > 0 ||
    (params.logit_bias !== undefined && hasKeys(params.logit_bias)) ||
    readsTokenCounts(params)
  );
}

/**
 * Changes last-position logits in place, in vLLM's order: only `allowed_token_ids` and what
 * guided decoding allows can be drawn, and no token that would complete one of the
 * `bad_words`; while fewer than `min_tokens` are made, no token that would end the completion
 * (the end of text, `stop_token_ids`) can be drawn (vLLM's); `logit_bias` added (OpenAI), then
 * the repetition penalty over prompt and completion tokens (CTRL's, as Hugging Face and vLLM
 * apply it: a positive logit divided by it, a negative one multiplied), then the frequency
 * and presence penalties over completion tokens (OpenAI's: count x frequency, plus presence
 * once a token has appeared). Greedy decoding sees the changed logits too.
 */
export function processLogits(
  logits: Float32Array,
  params: Penalties,
  history: TokenHistory,
  eosTokenId?: number,
): void {
  if (history.allowed) keepMasked(history.allowed, logits);
  else if (params.allowed_token_ids) keepOnly(logits, params.allowed_token_ids);
  history.guide?.mask(logits);
  for (const word of history.badWordIds ?? []) barLastOf(logits, word, history.generated);
  if ((params.min_tokens ?? 0) > history.generated.length)
    for (const id of [eosTokenId, ...(params.stop_token_ids ?? [])])
      if (id !== undefined && id < logits.length) logits[id] = Number.NEGATIVE_INFINITY;
  if (params.logit_bias) {
    // the API sends each id once and MAX_LOGIT_BIAS at most; a job from elsewhere (an older
    // API) costs no more than that per step either
    let left = MAX_LOGIT_BIAS;
    for (const id in params.logit_bias) {
      if (left-- === 0) break;
      const i = Number(id);
      if (i < logits.length) logits[i] = (logits[i] ?? 0) + (params.logit_bias[id] ?? 0);
    }
  }
  const repetition = params.repetition_penalty ?? 1;
  if (repetition !== 1) {
    const seen = new Set(history.promptIds);
    for (const id of history.outputCounts.keys()) seen.add(id);
    for (const id of seen) {
      const v = logits[id];
      if (v !== undefined) logits[id] = v > 0 ? v / repetition : v * repetition;
    }
  }
  const frequency = params.frequency_penalty ?? 0;
  const presence = params.presence_penalty ?? 0;
  if (frequency !== 0 || presence !== 0)
    for (const [id, count] of history.outputCounts) {
      const v = logits[id];
      if (v !== undefined) logits[id] = v - frequency * count - presence;
    }
}

/** Every logit but those of `ids` to minus infinity. */
export function keepOnly(logits: Float32Array, ids: Iterable<number>): void {
  const kept = [...ids].map((id) => [id, logits[id]] as const);
  logits.fill(Number.NEGATIVE_INFINITY);
  for (const [id, v] of kept) if (v !== undefined) logits[id] = v;
}

/**
 * A bad word's last token to minus infinity when the completion so far ends with the rest of
 * it (a one-token word always): it can never be completed (vLLM's rule, over completion tokens).
 */
function barLastOf(logits: Float32Array, word: readonly number[], generated: readonly number[]) {
  const before = word.length - 1;
  if (before > generated.length) return;
  for (let i = 0; i < before; i++) if (generated[generated.length - before + i] !== word[i]) return;
  const last = word[before];
  if (last !== undefined && last < logits.length) logits[last] = Number.NEGATIVE_INFINITY;
}

/** Whether an object has a key, without listing them all (called at every step). */
function hasKeys(record: Record<string, unknown>): boolean {
  for (const _ in record) return true;
  return false;
}
