import { type CompletionResult, FerryError } from "@ferry/protocol";
import type { ChatCompletionResponse, CompletionResponse } from "./output-schemas.js";
import { promptsOf } from "./prompts.js";
import {
  type ChatCompletionRequest as ChatRequest,
  type CompletionRequest,
  MAX_CHOICES,
} from "./schemas.js";

/**
 * The choices a request asks for when it asks for more than one, each a request for one:
 * `n` of every prompt, prompt by prompt (OpenAI's and vLLM's `index` order). The j-th choice
 * of a prompt draws with `seed + j`, so that a seeded request's choices differ and each can
 * be had alone; without a seed each draws its own. Undefined for a request of one choice.
 */
export function severalChoices(body: CompletionRequest): CompletionRequest[] | undefined;
export function severalChoices(body: ChatRequest): ChatRequest[] | undefined;
export function severalChoices(
  body: CompletionRequest | ChatRequest,
): Array<CompletionRequest | ChatRequest> | undefined;
export function severalChoices(
  body: CompletionRequest | ChatRequest,
): Array<CompletionRequest | ChatRequest> | undefined {
  const n = body.n ?? 1;
  const prompts = "messages" in body ? [undefined] : promptsOf(body.prompt);
  if (n * prompts.length === 1) return undefined;
  if (n * prompts.length > MAX_CHOICES)
    throw new FerryError(
      "INVALID_INPUT",
      `A request may ask for at most ${MAX_CHOICES} choices (prompts times n); this one asks for ${prompts.length} x ${n}`,
    );
  const seed = body.seed;
  // past the largest exact integer, seed + j rounds: two choices would draw alike
  if (typeof seed === "number" && !Number.isSafeInteger(seed + n - 1))
    throw new FerryError(
      "INVALID_INPUT",
      `seed + n - 1 (the last choice's seed) must be at most ${Number.MAX_SAFE_INTEGER}`,
    );
  return prompts.flatMap((prompt) =>
    Array.from({ length: n }, (_, j) => ({
      ...body,
      ...(prompt === undefined ? {} : { prompt }),
      n: 1,
      ...(seed === undefined || seed === null ? {} : { seed: seed + j }),
    })),
  );
}

/** vLLM's rule: usage in every chunk of a stream that asks for usage and for it to be continuous. */
export function continuousUsage(body: Pick<CompletionRequest, "stream_options">): boolean {
  return (
    body.stream_options?.include_usage === true &&
    body.stream_options?.continuous_usage_stats === true
  );
}

/** Several choices' answers as one: each choice indexed by its place, usage summed. */
export function joinAnswers<A extends CompletionResponse | ChatCompletionResponse>(
  answers: readonly A[],
  n: number,
): A {
  const [head] = answers;
  if (!head) throw new FerryError("INTERNAL", "no answers to join");
  return {
    ...head,
    choices: answers.flatMap((answer, index) =>
      answer.choices.map((choice) => ({ ...choice, index })),
    ),
    usage: sumUsage(
      answers.map((answer) => answer.usage),
      n,
    ),
  };
}

/**
 * The usage of several choices answered as one, listed in `severalChoices`' order: the
 * completions' tokens summed, each prompt's counted once however many choices it has (`n`).
 */
export function sumUsage(
  all: ReadonlyArray<CompletionResult["usage"] | undefined>,
  n = 1,
): CompletionResult["usage"] {
  let prompt = 0;
  let completion = 0;
  let cached: number | undefined;
  all.forEach((one, index) => {
    if (index % n === 0) {
      prompt += one?.prompt_tokens ?? 0;
      const details = one?.prompt_tokens_details;
      if (details) cached = (cached ?? 0) + details.cached_tokens;
    }
    completion += one?.completion_tokens ?? 0;
  });
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
  };
}
