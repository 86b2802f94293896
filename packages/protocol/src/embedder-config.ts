import { z } from "zod";

/**
 * An embedder's own model.json block (`embedding`): how its graph's output becomes one vector
 * per input, and what one input and one request may cost. The API reads it to refuse a request
 * before anything is queued; the worker to tokenize, batch, pool and normalize.
 */
export const embeddingConfigSchema = z
  .object({
    /**
     * How a sequence's hidden states become one vector: `cls` the first token's, `mean` the
     * average over its real tokens (the attention mask's), `last` its last real token's (a
     * decoder's). Required: a pooling the model was not trained with answers vectors that look
     * fine and retrieve nothing. A graph whose output is already pooled ([batch, hidden]) is
     * read as it is.
     */
    pooling: z.enum(["cls", "mean", "last"]),
    /** Each vector scaled to unit length (cosine similarity is then a dot product). */
    normalize: z.boolean().default(true),
    /** Tokens one input may have at most, its special tokens included (the position table's size). */
    max_tokens: z.number().int().positive(),
    /**
     * Width served when a request names none: the first that many values of the pooled vector,
     * normalized again (Matryoshka truncation). Without it, the whole hidden state.
     */
    dimensions: z.number().int().positive().optional(),
    /**
     * The widths a request's `dimensions` may ask for, where the model was trained so that a
     * vector's first values stand on their own (Matryoshka). Without it `dimensions` is refused,
     * as vLLM refuses it on a model not trained for it.
     */
    matryoshka_dimensions: z.array(z.number().int().positive()).min(1).optional(),
    /**
     * TEI's `max_batch_tokens`: a batch closes when its padded tokens (rows times its longest
     * row) would pass this, not only at `max_batch_size` rows.
     */
    max_batch_tokens: z.number().int().positive().default(16_384),
    /** Inputs one request may carry at most (OpenAI's limit is 2,048). */
    max_inputs: z.number().int().positive().default(2048),
    /** Tokens one request may carry at most, all its inputs together (OpenAI's is 300,000). */
    max_request_tokens: z.number().int().positive().default(300_000),
  })
  .refine((e) => e.max_tokens <= e.max_batch_tokens, {
    message: "max_tokens must be at most max_batch_tokens: a longest input must fit a batch alone",
    path: ["max_tokens"],
  });
export type EmbeddingConfig = z.infer<typeof embeddingConfigSchema>;

/**
 * An embedding row's inputs on the sync lane (`RowInputs`). A row is one input of a request:
 * its text as UTF-8 (the worker tokenizes it: it never trusts the API's count) or its token
 * ids as int64, and optionally vLLM's `truncate_prompt_tokens` as one int64. Its answer is the
 * pooled vector (normalized where model.json says) and the tokens it read.
 */
export const EMBED_ROW = {
  text: "text",
  ids: "input_ids",
  truncate: "truncate_prompt_tokens",
} as const;
export const EMBED_OUTPUT = { embedding: "embedding", tokens: "prompt_tokens" } as const;

/** Characters of text per token of `max_tokens` past which an input cannot fit whatever the tokenizer. */
export const EMBED_MAX_CHARS_PER_TOKEN = 64;
/**
 * Characters of text one request may carry per token of `max_request_tokens`: ordinary text
 * runs 4-8 characters a token, and a word no vocabulary holds is one token however long (a
 * WordPiece [UNK]), so a request of such words passed the token budget with megabytes that
 * every tokenizer on the way still reads.
 */
export const EMBED_MAX_REQUEST_CHARS_PER_TOKEN = 16;
