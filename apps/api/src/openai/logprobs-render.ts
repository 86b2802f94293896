import type { CompletionResult, PromptTokenLogprob, TokenLogprob } from "@ferry/protocol";
import type { ChatLogprobs, CompletionLogprobs, PromptLogprobs } from "./output-schemas.js";

// Log probabilities in OpenAI's shapes (legacy completion, chat) and vLLM's prompt_logprobs.

/** The job behind a completion, as OpenAI's objects name it. */
export interface CompletionJob {
  id: string;
  model: string;
  /** Epoch ms. */
  created_at: number;
  /** What the request asked for beyond the job's result (`PromptAsk`), kept with the job. */
  meta?: Record<string, unknown>;
}

/**
 * What a completion asked of its prompt's scores, kept in its job's meta by the API that
 * queued it (the worker scores the prompt once, with the larger count of alternatives).
 */
export interface PromptAsk {
  /** OpenAI's `echo` with `logprobs`: the prompt's tokens open the completion's logprobs. */
  echo_logprobs?: number;
  /** vLLM's `prompt_logprobs`: alternatives per prompt token. */
  prompt_logprobs?: number;
}

export function askOf(job: CompletionJob): PromptAsk {
  return (job.meta ?? {}) as PromptAsk;
}

/**
 * An echoed prompt's entries of OpenAI's logprobs. A job queued before vLLM's field existed
 * scored its prompt for the echo alone.
 */
export function echoedLogprobs(job: CompletionJob, result: CompletionResult): PromptTokenLogprob[] {
  const prompt = result.prompt_logprobs ?? [];
  const { echo_logprobs: echo, prompt_logprobs: vllm } = askOf(job);
  if (vllm === undefined) return prompt;
  if (echo === undefined) return [];
  return prompt.map((entry) => ({ ...entry, top: entry.top.slice(0, echo) }));
}

/**
 * vLLM's `prompt_logprobs`, when the request asked for them: per prompt token, its own entry
 * (with its rank) and its `top` likeliest alternatives (ranks 1...), keyed by token id.
 */
export function vllmPromptLogprobs(
  job: CompletionJob,
  result: CompletionResult,
): { prompt_logprobs?: PromptLogprobs } {
  const top = askOf(job).prompt_logprobs;
  if (top === undefined) return {};
  return {
    prompt_logprobs: (result.prompt_logprobs ?? []).map((entry) => {
      if (entry.logprob === null) return null;
      // a worker older than the ids keyed them by text
      const out: NonNullable<PromptLogprobs[number]> = {
        [String(entry.id ?? entry.token)]: {
          logprob: entry.logprob,
          rank: entry.rank ?? null,
          decoded_token: entry.token,
        },
      };
      entry.top.slice(0, top).forEach((alt, r) => {
        out[String(alt.id ?? alt.token)] ??= {
          logprob: alt.logprob,
          rank: r + 1,
          decoded_token: alt.token,
        };
      });
      return out;
    }),
  };
}

/**
 * Where each token's text begins in a completion's text, token after token (the legacy
 * shape's `text_offset`), across the chunks of a stream: the tokens of a character split
 * over several all begin where the character does.
 */
export class TextOffsets {
  private offset = 0;
  private readonly utf8 = new TextDecoder();

  take(bytes: readonly number[]): number {
    const at = this.offset;
    this.offset += this.utf8.decode(Uint8Array.from(bytes), { stream: true }).length;
    return at;
  }
}

/** Tokens' log probabilities in OpenAI's legacy completion shape. */
export function completionLogprobs(
  entries: ReadonlyArray<TokenLogprob | PromptTokenLogprob>,
  offsets = new TextOffsets(),
): CompletionLogprobs {
  return {
    tokens: entries.map((e) => e.token),
    token_logprobs: entries.map((e) => e.logprob),
    // OpenAI's: the likeliest alternatives and the sampled token, whichever it is; an echoed
    // prompt's first token has none
    top_logprobs: entries.map(({ token, logprob, top }) =>
      logprob === null
        ? null
        : Object.fromEntries([...top, { token, logprob }].map((t) => [t.token, t.logprob])),
    ),
    text_offset: entries.map((e) => offsets.take(e.bytes)),
  };
}

/** Tokens' log probabilities in OpenAI's chat shape. */
export function chatLogprobs(entries: readonly TokenLogprob[]): ChatLogprobs {
  const text = ({ token, logprob, bytes }: Omit<TokenLogprob, "top">) => ({
    token,
    logprob,
    bytes,
  });
  return {
    content: entries.map((e) => ({ ...text(e), top_logprobs: e.top.map(text) })),
    refusal: null,
  };
}
