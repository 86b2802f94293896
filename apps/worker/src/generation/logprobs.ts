import type { Tokenizer } from "@ferry/model-repository";
import type { PromptTokenLogprob, TokenLogprob } from "@ferry/protocol";
import { logSumExp, type PromptScores, topIndices } from "@ferry/runtime";

/**
 * `token`'s log probability under `logits` (a log-softmax over the whole vocabulary), with
 * the `k` likeliest tokens' and each one's text as a client reads it.
 */
export function tokenLogprob(
  logits: Float32Array,
  token: number,
  k: number,
  tokenizer: Pick<Tokenizer, "tokenText">,
): TokenLogprob {
  const logZ = logSumExp(logits);
  const of = (id: number) => ({ ...tokenizer.tokenText(id), logprob: (logits[id] ?? 0) - logZ });
  return { ...of(token), top: k > 0 ? topIndices(logits, k).map(of) : [] };
}

/**
 * A prompt's scores (its prefill's) as a client reads them: the first token has none. Each
 * token and alternative carries its id, and each scored token its rank (vLLM's shape needs both).
 */
export function promptLogprobs(
  promptIds: readonly number[],
  scores: PromptScores,
  tokenizer: Pick<Tokenizer, "tokenText">,
): PromptTokenLogprob[] {
  const { top } = scores;
  return promptIds.map((id, j) => {
    if (j === 0) return { ...tokenizer.tokenText(id), id, logprob: null, top: [] };
    const at = (j - 1) * top;
    return {
      ...tokenizer.tokenText(id),
      id,
      logprob: scores.logprobs[j - 1] ?? 0,
      rank: scores.ranks[j - 1] ?? 0,
      top: Array.from(scores.topIds.subarray(at, at + top), (alt, r) => ({
        ...tokenizer.tokenText(alt),
        id: alt,
        logprob: scores.topLogprobs[at + r] ?? 0,
      })),
    };
  });
}
