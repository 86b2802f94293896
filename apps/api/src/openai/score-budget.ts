import { FerryError, type SamplingParams } from "@ferry/protocol";
import type { PromptAsk } from "./logprobs-render.js";

/**
 * Log-probability entries one request may ask for, every choice's together: each is a token
 * with its score and text (and bytes), ~85 bytes of JSON in the answer, about twice that in
 * the job's event log (kept for its replay) and again in a stored response. n, max_tokens,
 * logprobs and prompt_logprobs each have a cap of their own, but their product had none: 64
 * choices of 255 tokens with 20 alternatives each, an echoed prompt's too, made an 8 MB answer
 * and ~44 MB of event logs in Redis from one 2 KB request. 65,536 (an answer of ~5.5 MB at
 * most) still takes one choice of 3,000 tokens with 20 alternatives, or 64 choices of 255
 * tokens with 3.
 */
export const MAX_SCORE_ENTRIES = 65_536;

/**
 * A streamed token with log probabilities is a chunk of its own, whose envelope (id, model,
 * choice, delta, finish reason, usage when asked) is ~220 bytes of JSON besides its entries:
 * counted as this many entries, so that a stream's answer is held to what the budget allows
 * one that is not (64 choices of 248 tokens with 3 alternatives streamed were 8.9 MB).
 */
export const STREAMED_TOKEN_ENTRIES = 3;

/** How a choice is asked for, beside its sampling parameters. */
export interface ScoredAs {
  /** Answered as a stream of chunks, a token each. */
  streamed?: boolean | undefined;
}

/**
 * What one choice's answer carries: each completion token with its alternatives (and its
 * chunk's envelope when streamed), and the prompt's tokens with theirs once for an echo and
 * once more for vLLM's `prompt_logprobs` (the prompt is scored once, but an answer that asks
 * for both renders both).
 */
export function scoreEntries(
  params: Pick<SamplingParams, "max_tokens" | "logprobs">,
  ask: PromptAsk,
  promptTokens: number,
  as: ScoredAs = {},
): number {
  return params.max_tokens * perToken(params.logprobs, as) + promptEntries(ask, promptTokens);
}

const per = (alternatives: number | null | undefined) =>
  alternatives === undefined || alternatives === null ? 0 : alternatives + 1;

function perToken(alternatives: number | null | undefined, as: ScoredAs): number {
  const entries = per(alternatives);
  return entries > 0 && as.streamed ? entries + STREAMED_TOKEN_ENTRIES : entries;
}

function promptEntries(ask: PromptAsk, promptTokens: number): number {
  return promptTokens * (per(ask.echo_logprobs) + per(ask.prompt_logprobs));
}

/**
 * A choice's max_tokens where the request named none (a chat's default: what the context
 * leaves) with log probabilities asked: lowered to its share of the budget (the request's
 * `choices` share it) with its prompt's entries, rather than a 400 for a limit the caller
 * never set.
 */
export function defaultMaxTokensWithin(
  params: Pick<SamplingParams, "max_tokens" | "logprobs" | "min_tokens">,
  ask: PromptAsk,
  promptTokens: number,
  as: ScoredAs & { choices?: number } = {},
): number {
  const each = perToken(params.logprobs, as);
  if (each === 0) return params.max_tokens;
  const share = Math.floor(MAX_SCORE_ENTRIES / Math.max(1, as.choices ?? 1));
  const within = Math.floor((share - promptEntries(ask, promptTokens)) / each);
  return Math.max(1, params.min_tokens ?? 1, Math.min(params.max_tokens, within));
}

/** Refuses a request whose choices together ask for more than MAX_SCORE_ENTRIES. */
export function checkScoreBudget(entries: number): void {
  if (entries <= MAX_SCORE_ENTRIES) return;
  throw new FerryError(
    "INVALID_INPUT",
    `This request asks for up to ${entries} log-probability entries (each choice's max_tokens x (logprobs + 1, and ${STREAMED_TOKEN_ENTRIES} more for each token's chunk when streamed), plus its prompt's tokens x (prompt_logprobs + 1) when echoed or asked for); at most ${MAX_SCORE_ENTRIES} a request. Ask for fewer choices, tokens or alternatives.`,
  );
}
