import { guidedProblem, guidedSpecOf } from "@ferry/guided";
import type { ModelEntry } from "@ferry/model-repository";
import { FerryError, MAX_LOGIT_BIAS, outOfVocabulary, type SamplingParams } from "@ferry/protocol";
import type { PromptAsk } from "./logprobs-render.js";
import type { CompletionRequest } from "./schemas.js";
import type { ToolChoice } from "./tool-calls.js";

/**
 * A request as the completion it is queued as: a chat's messages rendered into its prompt,
 * with what its answer is rendered by (a chat, a forced tool call).
 */
export type AsCompletion = CompletionRequest & {
  format: "completion" | "chat";
  toolCall?: ToolChoice;
};

/**
 * An OpenAI (or vLLM) completion request as the engine's sampling parameters (vLLM's
 * `to_sampling_params`): defaults filled, stop strings listed, guided decoding resolved to
 * one kind and checked within its budgets, client token ids checked against the vocabulary
 * and deduplicated. `maxTokens` is what fits the context; `special`, whether the prompt's
 * text gets the special tokens its tokenizer adds. What the answer must carry back beyond the
 * result (prompt scores) is `ask`.
 */
export function samplingParamsOf(
  body: AsCompletion,
  {
    maxTokens,
    special,
    vocabSize,
  }: { maxTokens: number; special: boolean; vocabSize: number | undefined },
): { params: SamplingParams; ask: PromptAsk } {
  const ask = promptAsk(body);
  const params: SamplingParams = {
    max_tokens: maxTokens,
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    top_k: body.top_k ?? 0,
    ignore_eos: body.ignore_eos ?? false,
    stop:
      body.stop === undefined || body.stop === null
        ? []
        : typeof body.stop === "string"
          ? [body.stop]
          : body.stop,
    ...(body.seed === undefined || body.seed === null ? {} : { seed: body.seed }),
    ...guideOf(body),
    ...definedOf({
      min_p: body.min_p,
      logit_bias: body.logit_bias,
      frequency_penalty: body.frequency_penalty,
      presence_penalty: body.presence_penalty,
      repetition_penalty: body.repetition_penalty,
      stop_token_ids: body.stop_token_ids,
      min_tokens: body.min_tokens,
      include_stop_str_in_output: body.include_stop_str_in_output || undefined,
      allowed_token_ids: body.allowed_token_ids,
      truncate_prompt_tokens: body.truncate_prompt_tokens,
      add_special_tokens: special || undefined,
      bad_words: body.bad_words,
      logprobs: body.logprobs,
      echo: body.echo || undefined,
      // the prompt is scored once, with as many alternatives as either use asks for
      prompt_logprobs: maxOf(ask.echo_logprobs, ask.prompt_logprobs),
    }),
  };
  if ((params.min_tokens ?? 0) > params.max_tokens)
    throw new FerryError(
      "INVALID_INPUT",
      `min_tokens (${params.min_tokens}) must be at most max_tokens (${params.max_tokens})`,
    );
  if (params.logit_bias) params.logit_bias = logitBiasOf(params.logit_bias, vocabSize);
  if (params.allowed_token_ids) {
    checkTokens(vocabSize, params.allowed_token_ids, "allowed_token_ids: token id");
    // a list longer than the vocabulary repeats itself: each id travels once
    params.allowed_token_ids = [...new Set(params.allowed_token_ids)];
  }
  return { params, ask };
}

/**
 * What a request asks of its prompt's scores: an echo's log probabilities (OpenAI's `echo` with
 * `logprobs`) and vLLM's `prompt_logprobs`, which a stream does not carry (vLLM refuses one
 * that asks for alternatives, and ignores 0).
 */
function promptAsk(body: CompletionRequest): PromptAsk {
  const vllm = body.prompt_logprobs ?? undefined;
  if (body.stream && (vllm ?? 0) > 0)
    throw new FerryError("INVALID_INPUT", "`prompt_logprobs` are not available when `stream=True`");
  return definedOf({
    echo_logprobs: body.echo ? body.logprobs : undefined,
    prompt_logprobs: body.stream ? undefined : vllm,
  });
}

/**
 * The guided decoding a request asks for, as the wire's fields: `guided_choice` or
 * `structured_outputs.choice`; `guided_regex` or `structured_outputs.regex`; JSON mode
 * (`response_format` json_object, `structured_outputs.json_object`); a schema (`response_format`
 * json_schema, `guided_json`, `structured_outputs.json`); a forced tool call's parameters. One
 * kind at most, and never with `ignore_eos` or `min_tokens`: a guided completion ends when its
 * text is whole.
 */
function guideOf(body: AsCompletion): Partial<SamplingParams> {
  const structured = body.structured_outputs;
  const format = body.response_format;
  const kinds = (
    [
      ["guided_choice", body.guided_choice && { guided_choice: body.guided_choice }],
      ["structured_outputs.choice", structured?.choice && { guided_choice: structured.choice }],
      ["guided_regex", body.guided_regex && { guided_regex: body.guided_regex }],
      ["structured_outputs.regex", structured?.regex && { guided_regex: structured.regex }],
      [
        "json_object",
        (format?.type === "json_object" || structured?.json_object === true) && {
          json_object: true,
        },
      ],
      [
        "response_format json_schema",
        format?.type === "json_schema" && { json_schema: format.json_schema.schema },
      ],
      ["guided_json", body.guided_json && { json_schema: body.guided_json }],
      ["structured_outputs.json", structured?.json && { json_schema: structured.json }],
      ["guided_grammar", body.guided_grammar && { guided_grammar: body.guided_grammar }],
      ["structured_outputs.grammar", structured?.grammar && { guided_grammar: structured.grammar }],
      ["a forced tool call", body.toolCall?.schema && { json_schema: body.toolCall.schema }],
    ] as Array<[string, Partial<SamplingParams> | false | null | undefined]>
  ).filter((entry): entry is [string, Partial<SamplingParams>] => Boolean(entry[1]));
  if (kinds.length > 1)
    throw new FerryError(
      "INVALID_INPUT",
      `give one of ${kinds.map(([kind]) => kind).join(", ")}, not several`,
    );
  const [kind, fields] = kinds[0] ?? [];
  if (!kind || !fields) return autoCallsGuide(body);
  if (body.ignore_eos || (body.min_tokens ?? 0) > 0)
    throw new FerryError(
      "INVALID_INPUT",
      `${kind} ends the completion when its text is whole: it cannot be combined with ignore_eos or min_tokens`,
    );
  // checked within its budgets here, before anything is queued: no worker sees what it would refuse
  const spec = guidedSpecOf(fields);
  const problem = spec && guidedProblem(spec);
  if (problem) throw new FerryError("INVALID_INPUT", `${kind}: ${problem}`);
  return fields;
}

/**
 * tool_choice "auto" with a Hermes-format model and no guide of the client's own: the text is
 * free, and a call the model opens is guided by its tool's parameters (not with ignore_eos,
 * whose end-of-text token the grammar would have to take as text).
 */
function autoCallsGuide(body: AsCompletion): Partial<SamplingParams> {
  const calls = body.toolCall?.calls;
  if (!calls || body.ignore_eos) return {};
  const problem = guidedProblem({ kind: "tool_calls", format: calls.format, tools: calls.tools });
  if (problem) throw new FerryError("INVALID_INPUT", `tools: ${problem}`);
  return { tool_calls_guide: calls };
}

function maxOf(...values: Array<number | undefined>): number | undefined {
  const given = values.filter((v) => v !== undefined);
  return given.length === 0 ? undefined : Math.max(...given);
}

/** The fields of `fields` that a request gave (neither undefined nor null). */
function definedOf<T extends Record<string, unknown>>(
  fields: T,
): { [K in keyof T]?: Exclude<T[K], null | undefined> } {
  return Object.fromEntries(
    Object.entries(fields).filter(([, value]) => value !== undefined && value !== null),
  ) as { [K in keyof T]?: Exclude<T[K], null | undefined> };
}

/**
 * `logit_bias` with each token id once, in its plain form: "7", "07" and "007" are one token,
 * and a body of such spellings named one id 61,000 times (each added at every step of every
 * sequence: a completion of 20 tokens took 7.6 s, the worker's other models waited).
 */
function logitBiasOf(
  bias: Record<string, number>,
  vocab: number | undefined,
): Record<string, number> {
  const given = Object.keys(bias);
  if (given.length > MAX_LOGIT_BIAS)
    throw new FerryError(
      "INVALID_INPUT",
      `logit_bias names ${given.length} token ids; at most ${MAX_LOGIT_BIAS}`,
    );
  const plain: Record<string, number> = {};
  const ids: number[] = [];
  for (const key of given) {
    const id = Number(key);
    if (!Number.isSafeInteger(id))
      throw new FerryError("INVALID_INPUT", `logit_bias: "${key.slice(0, 32)}" is no token id`);
    const name = String(id);
    if (name in plain)
      throw new FerryError(
        "INVALID_INPUT",
        `logit_bias names token id ${name} twice ("${key.slice(0, 32)}")`,
      );
    plain[name] = bias[key] as number;
    ids.push(id);
  }
  checkTokens(vocab, ids, "logit_bias: token id");
  return plain;
}

/**
 * Token ids a client gave (a prompt's, `logit_bias`'s keys) must name tokens the model has,
 * as vLLM requires; `what` names them in the refusal.
 */
export function checkTokens(vocab: number | undefined, ids: readonly number[], what: string): void {
  const unknown = outOfVocabulary(ids, vocab);
  if (unknown !== undefined)
    throw new FerryError(
      "INVALID_INPUT",
      `${what} ${unknown} is out of vocabulary (this model has ${vocab} tokens)`,
    );
}

/** The vocabulary size model.json gives, if any. */
export function entryVocab(entry: ModelEntry): number | undefined {
  const vocab = entry.config.architecture?.vocab_size;
  return typeof vocab === "number" ? vocab : undefined;
}
