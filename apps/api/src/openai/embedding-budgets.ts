import { type Tokenizer, withSpecials } from "@ferry/model-repository";
import {
  EMBED_MAX_CHARS_PER_TOKEN,
  EMBED_MAX_REQUEST_CHARS_PER_TOKEN,
  EMBED_ROW,
  type EmbeddingConfig,
  encodeTensor,
  FerryError,
  type RowInputs,
} from "@ferry/protocol";
import type { EmbeddingsRequest } from "./embeddings-schemas.js";

/** One input of a request: a text, or token ids read as they are. */
export type EmbedInput = string | readonly number[];

/** A request's `input` as its list of inputs, in order. */
export function inputsOf(input: EmbeddingsRequest["input"]): EmbedInput[] {
  if (typeof input === "string") return [input];
  if (input.length === 0) throw invalid("input must not be empty");
  // an array of numbers is one input's token ids, as OpenAI reads it
  if (typeof input[0] === "number") return [input as number[]];
  return input as EmbedInput[];
}

/**
 * vLLM's `truncate_prompt_tokens` as the count kept: -1 is the model's whole window; more
 * than the window is refused as vLLM refuses it.
 */
export function truncationOf(asked: number | undefined, maxTokens: number): number | undefined {
  if (asked === undefined) return undefined;
  if (asked === -1) return maxTokens;
  if (asked === 0) throw invalid("truncate_prompt_tokens must be at least 1, or -1");
  if (asked > maxTokens)
    throw invalid(
      `truncate_prompt_tokens value (${asked}) is greater than max_model_len (${maxTokens}). Please, select a smaller truncation size.`,
    );
  return asked;
}

/**
 * Every input counted and checked against the model's budgets before anything is queued (how
 * many inputs, tokens per input, tokens in all), then made a sync-lane row each. The counts
 * decide admission only: the worker tokenizes a text again and never runs past max_tokens.
 */
export function embeddingRows(
  embedding: EmbeddingConfig,
  tokenizer: Tokenizer,
  inputs: readonly EmbedInput[],
  truncate: number | undefined,
  vocab: number | undefined,
): { rows: RowInputs[]; tokens: number } {
  if (inputs.length > embedding.max_inputs)
    throw invalid(
      `Too many inputs: ${inputs.length}. The max number of inputs is ${embedding.max_inputs}.`,
    );
  const { max_tokens: maxTokens } = embedding;
  const maxChars = embedding.max_request_tokens * EMBED_MAX_REQUEST_CHARS_PER_TOKEN;
  let chars = 0;
  for (const input of inputs) if (typeof input === "string") chars += input.length;
  if (chars > maxChars)
    throw invalid(
      `Requested ${chars} characters of text, max ${maxChars} per request (${EMBED_MAX_REQUEST_CHARS_PER_TOKEN} a token of the ${embedding.max_request_tokens} tokens per request)`,
    );
  let total = 0;
  const rows = inputs.map((input, k) => {
    const count = countOf(input, k, tokenizer, maxTokens, truncate, vocab);
    if (count > maxTokens)
      throw invalid(
        `This model's maximum context length is ${maxTokens} tokens. However, you requested ${count} tokens in input ${k} for embedding generation. Please reduce the length of the input.`,
      );
    total += count;
    // counting stops here: a hostile request costs no more than the budget it passes
    if (total > embedding.max_request_tokens)
      throw invalid(
        `Requested ${total} tokens in the first ${k + 1} of ${inputs.length} inputs, max ${embedding.max_request_tokens} tokens per request`,
      );
    return rowOf(input, truncate);
  });
  return { rows, tokens: total };
}

function countOf(
  input: EmbedInput,
  k: number,
  tokenizer: Tokenizer,
  maxTokens: number,
  truncate: number | undefined,
  vocab: number | undefined,
): number {
  if (typeof input !== "string") {
    if (input.length === 0) throw invalid(`input ${k} has no token ids`);
    const unknown = vocab === undefined ? undefined : input.find((id) => id >= vocab);
    if (unknown !== undefined)
      throw invalid(`Token id ${unknown} in input ${k} is out of vocabulary (${vocab} tokens)`);
    return Math.min(input.length, truncate ?? input.length);
  }
  // a text no truncation could make fit costs nothing to refuse; one to be cut is bounded too
  if (input.length > maxTokens * EMBED_MAX_CHARS_PER_TOKEN)
    throw invalid(
      `input ${k} has ${input.length} characters, far more than this model's ${maxTokens} tokens hold`,
    );
  return withSpecials(tokenizer, input, truncate).length;
}

function rowOf(input: EmbedInput, truncate: number | undefined): RowInputs {
  const row: RowInputs =
    typeof input === "string"
      ? { [EMBED_ROW.text]: Buffer.from(input, "utf8").toString("base64") }
      : // ids past the truncation are never read: not sent (the worker cuts them too)
        {
          [EMBED_ROW.ids]: encodeTensor(
            "INT64",
            truncate === undefined ? input : input.slice(-truncate),
          ),
        };
  if (truncate !== undefined) row[EMBED_ROW.truncate] = encodeTensor("INT64", [truncate]);
  return row;
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
