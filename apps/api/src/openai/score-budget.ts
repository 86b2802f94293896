import { FerryError, type SamplingParams } from "@ferry/protocol";

/**
 * Log-probability entries one request may ask for, every choice's together: each is a token
 * with its score and text (and bytes) in the answer, in the job's event log (kept for its
 * replay) and in a stored response. n, max_tokens, logprobs and prompt_logprobs each have a
 * cap of their own, but their product had none: 64 choices of 255 tokens with 20
 * alternatives each, an echoed prompt's too, made an 8 MB answer and ~44 MB of event logs in
 * Redis from one 2 KB request. 131,072 still takes one choice of 4,096 tokens with 20
 * alternatives and its 2,048-token prompt's, or 64 choices of 255 tokens with 5.
 */
export const MAX_SCORE_ENTRIES = 131_072;

/** What one choice asks to be scored: its tokens and its prompt's, each with alternatives. */
export function scoreEntries(
  params: Pick<SamplingParams, "max_tokens" | "logprobs" | "prompt_logprobs">,
  promptTokens: number,
): number {
  const completion =
    params.logprobs === undefined || params.logprobs === null
      ? 0
      : params.max_tokens * (params.logprobs + 1);
  const prompt =
    params.prompt_logprobs === undefined || params.prompt_logprobs === null
      ? 0
      : promptTokens * (params.prompt_logprobs + 1);
  return completion + prompt;
}

/** Refuses a request whose choices together ask for more than MAX_SCORE_ENTRIES. */
export function checkScoreBudget(entries: number): void {
  if (entries <= MAX_SCORE_ENTRIES) return;
  throw new FerryError(
    "INVALID_INPUT",
    `This request asks for up to ${entries} log-probability entries (each choice's max_tokens x (logprobs + 1), plus its prompt's tokens x (prompt_logprobs + 1) when echoed or asked for); at most ${MAX_SCORE_ENTRIES} a request. Ask for fewer choices, tokens or alternatives.`,
  );
}
