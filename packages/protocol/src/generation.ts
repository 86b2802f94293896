import { z } from "zod";
import { traceCarrierSchema, WIRE_VERSION } from "./wire.js";

/** Likeliest alternatives a token's log probability may come with (vLLM's default cap). */
export const MAX_LOGPROBS = 20;
/**
 * Token ids one `logit_bias` may name: a ban list or a handful of boosts. The worker adds each
 * to every sequence's logits at every step, so the count is a cost per token, not per request.
 */
export const MAX_LOGIT_BIAS = 300;

/** Sampling parameters of one completion, as OpenAI's API names them. */
export const samplingParamsSchema = z.object({
  max_tokens: z.number().int().positive(),
  /** 0 means greedy. */
  temperature: z.number().min(0).max(2),
  top_p: z.number().gt(0).max(1),
  /** 0 means no top-k cut. */
  top_k: z.number().int().min(0),
  /** Same seed, same text, whatever else shares the batch. */
  seed: z.number().int().optional(),
  stop: z.array(z.string()).max(4),
  /** vLLM's extension: keep generating past the end-of-text token, up to max_tokens. */
  ignore_eos: z.boolean().default(false),
  /**
   * Report each completion token's log probability and this many likeliest alternatives
   * (OpenAI's `logprobs`, a chat's `top_logprobs`); absent: none reported.
   */
  logprobs: z.number().int().min(0).max(MAX_LOGPROBS).optional(),
  /** OpenAI's `echo`: the completion's text begins with its prompt's. */
  echo: z.boolean().optional(),
  /**
   * The prompt's tokens' log probabilities too, with this many likeliest alternatives (an
   * echoed prompt's, as OpenAI's `echo` with `logprobs` gives them); absent: none.
   */
  prompt_logprobs: z.number().int().min(0).max(MAX_LOGPROBS).optional(),
  /** vLLM's: no end of text, stop token or stop string before this many tokens. */
  min_tokens: z.number().int().min(0).optional(),
  /** vLLM's: token ids that end the completion as the end-of-text token does (ignore_eos or not). */
  stop_token_ids: z.array(z.number().int().min(0)).optional(),
  /** vLLM's: only the prompt's last this many tokens are read (left truncation). */
  truncate_prompt_tokens: z.number().int().min(1).optional(),
  /**
   * vLLM's: the prompt's text is encoded with the special tokens its tokenizer's
   * post-processor adds (a BOS). Sent only where the tokenizer adds some.
   */
  add_special_tokens: z.boolean().optional(),
  /** vLLM's: the text ends after the stop string that ended it, not before. */
  include_stop_str_in_output: z.boolean().optional(),
  /** JSON mode (OpenAI's `response_format` json_object, vLLM's `json_object`): one JSON object. */
  json_object: z.boolean().optional(),
  /**
   * Structured outputs (OpenAI's `json_schema` response format, vLLM's `guided_json`): the
   * completion is a JSON text this schema accepts.
   */
  json_schema: z.record(z.string(), z.unknown()).optional(),
  /** vLLM's guided decoding: the completion matches this regular expression, whole. */
  guided_regex: z.string().optional(),
  /** vLLM's guided decoding: the completion is exactly one of these. */
  guided_choice: z.array(z.string().min(1)).min(1).optional(),
  /** vLLM's guided decoding: the completion is a text of this EBNF grammar (XGrammar's dialect). */
  guided_grammar: z.string().optional(),
  /**
   * A chat with tool_choice "auto" and a Hermes-format model: text is free, but a call the
   * model opens (`<tool_call>`) is guided by its tool's parameters (XGrammar's structural tags).
   */
  tool_calls_guide: z
    .object({
      format: z.literal("hermes"),
      tools: z
        .array(z.object({ name: z.string(), parameters: z.record(z.string(), z.unknown()) }))
        .min(1),
      single: z.boolean().optional(),
    })
    .optional(),
  /** vLLM's: words the completion may not contain (their last token is barred after the rest). */
  bad_words: z.array(z.string()).optional(),
  /** vLLM's: only these token ids can be drawn (the model's logprobs are still its own). */
  allowed_token_ids: z.array(z.number().int().min(0)).min(1).optional(),
  /** vLLM's: drops tokens less likely than min_p times the likeliest one (0: none). */
  min_p: z.number().min(0).max(1).optional(),
  /**
   * OpenAI's: added to a token id's logit before sampling, -100 to 100; each id once, in its
   * plain decimal form (the API writes them so), MAX_LOGIT_BIAS at most.
   */
  logit_bias: z
    .record(z.string().regex(/^(0|[1-9]\d*)$/), z.number().min(-100).max(100))
    .refine((bias) => Object.keys(bias).length <= MAX_LOGIT_BIAS, {
      message: `at most ${MAX_LOGIT_BIAS} token ids`,
    })
    .optional(),
  /** OpenAI's: subtracted per time a token already appears in the completion, -2 to 2. */
  frequency_penalty: z.number().min(-2).max(2).optional(),
  /** OpenAI's: subtracted once a token appears in the completion, -2 to 2. */
  presence_penalty: z.number().min(-2).max(2).optional(),
  /** vLLM's and Hugging Face's: > 1 discourages tokens of the prompt and completion. */
  repetition_penalty: z.number().gt(0).optional(),
});
export type SamplingParams = z.infer<typeof samplingParamsSchema>;

/**
 * Sampling fields a job carries that this build does not know: sent by a newer API to an
 * older worker in a rolling upgrade, each would be ignored and the answer come out other than
 * asked. Readers refuse the job instead.
 */
export function unknownSamplingFields(params: object): string[] {
  return Object.keys(params).filter((key) => !(key in samplingParamsSchema.shape));
}

/** Job data for a generator queue: one job per completion. */
export const generateJobSchema = z.object({
  v: z.literal(WIRE_VERSION),
  kind: z.literal("generate"),
  model: z.string(),
  version: z.string(),
  prompt: z.string(),
  /**
   * The prompt as token ids, given by the client, run as they are (never decoded and encoded
   * again); `prompt` is then empty.
   */
  prompt_ids: z.array(z.number().int().min(0)).min(1).optional(),
  params: samplingParamsSchema,
  /** Epoch ms after which the completion must not start. */
  deadline: z.number(),
  accepted_at: z.number(),
  meta: z.record(z.string(), z.unknown()).optional(),
  /**
   * How long the job's event log is kept, in s: a sync completion's only for resuming, an
   * async one's as long as jobs are kept (the deployment's JOB_TTL_S, when absent).
   */
  keep_s: z.number().int().positive().optional(),
  trace: traceCarrierSchema.optional(),
  /** Whose request it is (an API key's tenant): keys take turns on a model's grammar thread. */
  owner: z.string().optional(),
});
export type GenerateJob = z.infer<typeof generateJobSchema>;

/**
 * The first of a client's token ids that a model of `vocabSize` tokens does not know, if any
 * (none known when the size is not).
 */
export function outOfVocabulary(ids: readonly number[], vocabSize?: number): number | undefined {
  if (vocabSize === undefined) return undefined;
  return ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
}

/** A token as a client reads it: its text (or `bytes:\\xNN` for part of a character), its bytes. */
const tokenTextSchema = z.object({ token: z.string(), bytes: z.array(z.number().int()) });

/**
 * A completion token's log probability under the model (its own distribution, before
 * penalties, bias or temperature: vLLM's default), and the likeliest alternatives.
 */
export const tokenLogprobSchema = tokenTextSchema.extend({
  logprob: z.number(),
  top: z.array(tokenTextSchema.extend({ logprob: z.number() })),
});
export type TokenLogprob = z.infer<typeof tokenLogprobSchema>;

/**
 * Where a completion taken over from another worker picks up: the token ids its log already
 * holds, and their log probabilities where the job asked for them.
 */
export interface ResumePoint {
  ids: readonly number[];
  logprobs: readonly TokenLogprob[];
}

/**
 * A prompt token's: the first has none (`null`, no alternatives); nothing came before it.
 * With the token ids, and the token's rank where it was scored (what vLLM's `prompt_logprobs`
 * are keyed by and report); a worker older than those fields leaves them out.
 */
export const promptTokenLogprobSchema = tokenLogprobSchema.extend({
  logprob: z.number().nullable(),
  id: z.number().int().optional(),
  rank: z.number().int().optional(),
  top: z.array(tokenTextSchema.extend({ logprob: z.number(), id: z.number().int().optional() })),
});
export type PromptTokenLogprob = z.infer<typeof promptTokenLogprobSchema>;

export const finishReasonSchema = z.enum(["stop", "length", "cancelled"]);
export type FinishReason = z.infer<typeof finishReasonSchema>;

export const usageSchema = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  /** OpenAI's: prompt tokens whose KV cache came from the prefix cache (none from older workers). */
  prompt_tokens_details: z.object({ cached_tokens: z.number().int() }).optional(),
});
export type Usage = z.infer<typeof usageSchema>;

/** The final answer of a completion, stored as the job's return value. */
export const completionResultSchema = z.object({
  text: z.string(),
  finish_reason: finishReasonSchema,
  usage: usageSchema,
  /** Time to first token, in ms from the job's start. */
  ttft_ms: z.number(),
  /**
   * Where its time went, in ms: `queue` from the API's accept to a worker's pick-up, `batch`
   * waiting there for a seat in the continuous batch, `infer` from then to its end; absent
   * from older workers.
   */
  timing: z.object({ queue_ms: z.number(), batch_ms: z.number(), infer_ms: z.number() }).optional(),
  /** Every completion token's, in order, when the job asked for them. */
  logprobs: z.array(tokenLogprobSchema).optional(),
  /** Every prompt token's, when the job asked for them (`prompt_logprobs`). */
  prompt_logprobs: z.array(promptTokenLogprobSchema).optional(),
});
export type CompletionResult = z.infer<typeof completionResultSchema>;

/**
 * What a job's event log holds, in order: `status` changes, `token` chunks of text, then one
 * `result` or `error`, then `done`. Every event has the id Redis gave it in the job's stream.
 */
export type JobEventBody =
  | { type: "status"; status: "running" | "queued" }
  /**
   * `ids`: the token ids sampled since the previous token event (text may lag them while a
   * stop string or a UTF-8 character is incomplete). A worker that takes over a stalled job
   * replays them to resume where the client's view ends. Internal: not shown to clients.
   * `logprobs`: those ids' log probabilities, when the job asked for them. An echoed prompt's
   * text opens the first token event, with `prompt_logprobs` when asked for.
   */
  | {
      type: "token";
      text: string;
      index: number;
      ids?: number[];
      logprobs?: TokenLogprob[];
      prompt_logprobs?: PromptTokenLogprob[];
    }
  | { type: "result"; result: unknown }
  | { type: "error"; error: { code: string; message: string } }
  | { type: "done" };

export interface JobEvent {
  /** Stream id ("<ms>-<seq>"): increasing, and what Last-Event-ID names. */
  id: string;
  body: JobEventBody;
}
