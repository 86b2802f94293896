import { guidedProblem, guidedSpecOf } from "@ferry/guided";
import {
  loadTokenizer,
  type ModelEntry,
  type ModelRepository,
  type Tokenizer,
  tokenizerConfigSchema,
} from "@ferry/model-repository";
import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  FerryError,
  type JobEvent,
  outOfVocabulary,
  type SamplingParams,
} from "@ferry/protocol";
import type { GenerateRequest, InferenceClient, JobRecord } from "@ferry/transport";
import { type ChatTemplateRequest, ChatTemplates } from "./chat-template.js";
import type { CallOptions } from "./inference-service.js";
import type { ApiMetrics } from "./metrics.js";
import { chatResponse, completionResponse, type PromptAsk } from "./openai-render.js";
import {
  type ChatCompletionResponse,
  type ChatCompletionRequest as ChatRequest,
  type CompletionRequest,
  type CompletionResponse,
  MAX_CHOICES,
} from "./schemas.js";
import { type ToolChoice, toolChoice } from "./tool-calls.js";
import type { TrafficRouter } from "./traffic-router.js";

/**
 * A request as the completion it is queued as: a chat's messages rendered into its prompt,
 * with what its answer is rendered by (a chat, a forced tool call).
 */
type AsCompletion = CompletionRequest & {
  format: "completion" | "chat";
  toolCall?: ToolChoice;
};

/** OpenAI's and vLLM's max_tokens for a completion that leaves it out. */
const DEFAULT_MAX_TOKENS = 16;

/**
 * Characters of prompt per token of context past which a prompt cannot fit whatever the
 * tokenizer: refused before it is tokenized, so that a huge prompt costs the API no CPU.
 */
const MAX_CHARS_PER_TOKEN = 64;

/** A completion's job and the events it answers with, subscribed before the job could run. */
export interface FollowedCompletion {
  record: JobRecord;
  events: AsyncGenerator<JobEvent>;
  close: () => void;
}

/**
 * OpenAI-compatible completions on generator models: every completion is a job on the
 * model's queue, and its tokens come back through the job's event log. A request that cannot
 * fit the model's context is refused here, before anything is queued.
 */
export class CompletionService {
  private readonly tokenizers = new WeakMap<ModelEntry, Promise<Tokenizer>>();
  private readonly templates = new ChatTemplates();
  /** Rendered chats by their messages (weakly: gone with the request). */
  private readonly renders = new WeakMap<ChatTemplateRequest["messages"], Promise<string>>();

  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly metrics: ApiMetrics,
    private readonly router: TrafficRouter,
    /** How long a followed completion's job is kept once done, unless `kept` (SYNC_JOB_TTL_S). */
    private readonly resumableForS?: number,
  ) {}

  /** How long a completion followed to its end is kept (undefined: as long as async jobs). */
  private followedKeep(opts: CallOptions): number | undefined {
    return opts.kept ? undefined : this.resumableForS;
  }

  /** Counts a finished completion's tokens (what the dashboard's tokens/s is made of). */
  counted(job: JobRecord, result: CompletionResult): CompletionResult {
    this.metrics.completionTokens.inc({ model: job.model }, result.usage.completion_tokens);
    return result;
  }

  /** Validates a request and enqueues it; the returned record's id names the job. */
  async submit(
    body: CompletionRequest | ChatRequest,
    opts: CallOptions,
    meta?: Record<string, unknown>,
  ): Promise<JobRecord> {
    const { job, options } = await this.prepare(await this.asCompletion(body), opts, meta);
    return this.client.jobs.submitGenerate(job, options);
  }

  /**
   * Validates a request, enqueues it and follows its events (subscribed before it can run).
   * `meta` is kept with the job for whoever renders it later (a Responses API conversation).
   */
  async follow(
    body: CompletionRequest | ChatRequest,
    opts: CallOptions,
    signal?: AbortSignal,
    meta?: Record<string, unknown>,
  ): Promise<FollowedCompletion> {
    const { job, options } = await this.prepare(await this.asCompletion(body), opts, meta);
    return this.client.jobs.submitGenerateFollowing(
      job,
      { ...options, keepS: this.followedKeep(opts) },
      signal,
    );
  }

  /**
   * Several choices (`severalChoices`), one job each, followed: all are validated before any is
   * queued, and a refusal of one (a full queue) cancels those already queued.
   */
  async followEach(
    bodies: ReadonlyArray<CompletionRequest | ChatRequest>,
    opts: CallOptions,
    signal?: AbortSignal,
  ): Promise<FollowedCompletion[]> {
    const prepared = await Promise.all(
      bodies.map(async (body) => this.prepare(await this.asCompletion(body), opts)),
    );
    const followed: FollowedCompletion[] = [];
    try {
      const keepS = this.followedKeep(opts);
      for (const { job, options } of prepared)
        followed.push(
          await this.client.jobs.submitGenerateFollowing(job, { ...options, keepS }, signal),
        );
      return followed;
    } catch (err) {
      for (const one of followed) {
        this.cancel(one.record.id);
        one.close();
      }
      throw err;
    }
  }

  /**
   * A chat request as the completion it is: its messages rendered by the model's chat template
   * into one prompt that ends where the assistant's turn begins. The job remembers it was a
   * chat, so that its result is rendered as one.
   */
  private async asCompletion(body: CompletionRequest | ChatRequest): Promise<AsCompletion> {
    if (!("messages" in body)) return { ...body, format: "completion" };
    const {
      messages: _m,
      max_completion_tokens,
      user: _u,
      logprobs,
      top_logprobs,
      tools: _t,
      tool_choice: _c,
      parallel_tool_calls: _p,
      add_generation_prompt: _g,
      continue_final_message: _f,
      chat_template_kwargs: _k,
      add_special_tokens,
      // refused unless false (vLLM's, which Ferry's chat lacks)
      echo: _e,
      chat_template: _ct,
      documents: _d,
      ...rest
    } = body;
    // OpenAI's rule: alternatives are asked for with the log probabilities, not alone
    if (!logprobs && (top_logprobs ?? 0) > 0)
      throw new FerryError("INVALID_INPUT", "top_logprobs needs logprobs: true");
    // a forced call is guided decoding by its parameters' schema
    const call = toolChoice(
      body,
      this.repository.resolve(body.model).entry.config.tool_call_parser,
    );
    return {
      ...rest,
      prompt: await this.renderChat(body),
      max_tokens: max_completion_tokens ?? body.max_tokens,
      logprobs: logprobs ? (top_logprobs ?? 0) : null,
      format: "chat",
      // vLLM's default for a chat: its template writes the special tokens it needs
      add_special_tokens: add_special_tokens ?? false,
      ...(call ? { toolCall: call } : {}),
    };
  }

  /**
   * A chat's messages rendered by its model's template, once per request: the `n` choices of
   * one request share its messages (`severalChoices` copies the reference).
   */
  renderChat(body: ChatTemplateRequest & { model: string }): Promise<string> {
    let prompt = this.renders.get(body.messages);
    if (!prompt) {
      prompt = this.templates.renderRequest(this.repository.resolve(body.model).entry, body);
      this.renders.set(body.messages, prompt);
    }
    return prompt;
  }

  /**
   * The version a completion runs on: the one its route names, else one drawn by the model's
   * canary split (the stable one without a split), as a classifier's request is routed.
   */
  async versionFor(model: string, named: string | undefined): Promise<string> {
    return named ?? (await this.router.pick(this.repository.get(model)));
  }

  /** Stops a completion: its seat is freed at the next decode step. */
  cancel(id: string): void {
    void this.client.jobs.cancel(id).catch(() => undefined);
  }

  private async prepare(
    body: AsCompletion,
    opts: CallOptions,
    extraMeta?: Record<string, unknown>,
  ) {
    const { entry, version } = this.repository.resolve(
      body.model,
      await this.versionFor(body.model, opts.version),
    );
    if (entry.config.kind !== "generator") {
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${body.model}' is a ${entry.config.kind}; use /v1/models/${body.model}/predict`,
      );
    }
    const [prompt = ""] = promptsOf(body.prompt);
    if (severalChoices(body))
      throw new FerryError(
        "INVALID_INPUT",
        "several prompts, or n > 1, are answered only by /v1/completions and /v1/chat/completions; an async job is one prompt and one choice",
      );
    if (prompt.length === 0) throw new FerryError("INVALID_INPUT", "prompt must not be empty");
    // a chat without max_tokens may use what the context leaves (OpenAI's and vLLM's default);
    // a completion makes 16
    const asked = body.max_tokens ?? (body.format === "chat" ? undefined : DEFAULT_MAX_TOKENS);
    const ask = promptAsk(body);
    // vLLM's default for a completion; sent to the worker only where the tokenizer adds some
    const special =
      typeof prompt === "string" &&
      (body.add_special_tokens ?? true) &&
      (await this.tokenizer(entry)).addsSpecialTokens;
    const { maxTokens, promptTokens } = await this.fitContext(
      entry,
      prompt,
      asked,
      body.truncate_prompt_tokens ?? undefined,
      special,
    );
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
    if (params.logit_bias)
      checkTokens(entry, Object.keys(params.logit_bias).map(Number), "logit_bias: token id");
    if (params.allowed_token_ids) {
      checkTokens(entry, params.allowed_token_ids, "allowed_token_ids: token id");
      // a list longer than the vocabulary repeats itself: each id travels once
      params.allowed_token_ids = [...new Set(params.allowed_token_ids)];
    }
    return {
      job: {
        model: entry.config.name,
        version,
        ...(typeof prompt === "string" ? { prompt } : { prompt: "", prompt_ids: prompt }),
        params,
        deadline: Date.now() + (opts.timeoutMs ?? entry.config.default_timeout_ms),
        meta: {
          ...extraMeta,
          format: body.format,
          request_id: opts.requestId,
          ...ask,
          ...body.toolCall?.ask,
          // vLLM's continuous usage: each chunk of the stream counts the prompt
          ...(continuousUsage(body) ? { prompt_tokens: promptTokens } : {}),
        },
      } satisfies GenerateRequest,
      options: {
        priority: opts.priority ?? DEFAULT_PRIORITY,
        maxQueueSize: entry.config.max_queue_size,
        owner: opts.tenant.id,
      },
    };
  }

  /**
   * The completion's max_tokens: prompt plus completion must fit the context window, as vLLM
   * and OpenAI require, and none asked for is what the window leaves. A prompt of token ids
   * must name tokens the model has. `truncate`: vLLM's `truncate_prompt_tokens`, the prompt's
   * last tokens that are read (a longer prompt is then no reason to refuse).
   */
  private async fitContext(
    entry: ModelEntry,
    prompt: string | readonly number[],
    asked: number | undefined,
    truncate: number | undefined,
    addSpecialTokens: boolean,
  ): Promise<{ maxTokens: number; promptTokens?: number }> {
    if (typeof prompt !== "string") checkTokens(entry, prompt, "Token id");
    const context = entry.config.architecture?.context_length;
    if (typeof context !== "number") return { maxTokens: asked ?? DEFAULT_MAX_TOKENS };
    if (truncate !== undefined && truncate > context)
      throw new FerryError(
        "INVALID_INPUT",
        `truncate_prompt_tokens value (${truncate}) is greater than max_model_len (${context}). Please, select a smaller truncation size.`,
      );
    if (typeof prompt === "string" && truncate === undefined) checkPromptChars(entry, prompt);
    const whole =
      typeof prompt === "string"
        ? (await this.tokenizer(entry)).count(prompt, addSpecialTokens)
        : prompt.length;
    const promptTokens = Math.min(whole, truncate ?? whole);
    const maxTokens = asked ?? Math.max(1, context - promptTokens);
    if (promptTokens + maxTokens > context)
      throw new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the prompt, ${maxTokens} for the completion). Please reduce the length of the prompt or completion.`,
      );
    return { maxTokens, promptTokens };
  }

  /** The model's tokenizer, loaded once. */
  tokenizer(entry: ModelEntry): Promise<Tokenizer> {
    let tokenizer = this.tokenizers.get(entry);
    if (!tokenizer) {
      const config = tokenizerConfigSchema.parse(entry.config.tokenizer ?? { type: "byte" });
      tokenizer = loadTokenizer(entry.dir, config);
      this.tokenizers.set(entry, tokenizer);
    }
    return tokenizer;
  }

  /**
   * Waits for the whole completion (no streaming). A caller that goes away (`signal`) cancels
   * it, as a streaming client's disconnect does, so it holds no seat it will never read.
   */
  async complete(
    body: CompletionRequest | ChatRequest,
    opts: CallOptions,
    signal?: AbortSignal,
  ): Promise<CompletionResponse | ChatCompletionResponse> {
    const several = severalChoices(body);
    if (several) return this.completeEach(body, several, opts, signal);
    return this.answer(body, await this.follow(body, opts, signal), signal);
  }

  /**
   * Several choices: one completion each, all validated before any is queued, run side by
   * side, answered together as OpenAI does (choice `index` i for the i-th of `severalChoices`,
   * usage summed with each prompt counted once). A failure of one cancels the others: the
   * request fails whole.
   */
  private async completeEach(
    body: CompletionRequest | ChatRequest,
    choices: ReadonlyArray<CompletionRequest | ChatRequest>,
    opts: CallOptions,
    signal?: AbortSignal,
  ): Promise<CompletionResponse | ChatCompletionResponse> {
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort);
    try {
      const followed = await this.followEach(choices, opts, stop.signal);
      const answers = await Promise.all(followed.map((one) => this.answer(body, one, stop.signal)));
      return joinAnswers(answers, body.n ?? 1);
    } catch (err) {
      // the others stop too: their answers would be thrown away
      stop.abort();
      throw err;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Waits for a followed completion's result; `signal` cancels it. */
  private async answer(
    body: CompletionRequest | ChatRequest,
    { record: job, events, close }: FollowedCompletion,
    signal?: AbortSignal,
  ): Promise<CompletionResponse | ChatCompletionResponse> {
    const render = "messages" in body ? chatResponse : completionResponse;
    return render(job, await this.result({ record: job, events, close }, signal));
  }

  /** Waits for a followed completion's result; a caller that goes away (`signal`) cancels it. */
  async result(
    { record: job, events, close }: FollowedCompletion,
    signal?: AbortSignal,
  ): Promise<CompletionResult> {
    const onAbort = () => this.cancel(job.id);
    signal?.addEventListener("abort", onAbort);
    // aborted before it was waited on (its client went away, or a neighbour prompt failed)
    if (signal?.aborted) onAbort();
    try {
      for await (const event of events) {
        if (event.body.type === "result")
          return this.counted(job, event.body.result as CompletionResult);
        if (event.body.type === "error") throw errorOf(event);
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      close();
    }
    if (signal?.aborted) throw new FerryError("CANCELLED", "the client went away");
    throw new FerryError("UNAVAILABLE", "the job's event log ended without a result");
  }
}

export function errorOf(event: JobEvent): FerryError {
  if (event.body.type !== "error") return new FerryError("INTERNAL", "not an error event");
  const { code, message } = event.body.error;
  return new FerryError(code as FerryError["code"], message);
}

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
  return prompts.flatMap((prompt) =>
    Array.from({ length: n }, (_, j) => ({
      ...body,
      ...(prompt === undefined ? {} : { prompt }),
      n: 1,
      ...(seed === undefined || seed === null ? {} : { seed: seed + j }),
    })),
  );
}

/**
 * What a request asks of its prompt's scores: an echo's log probabilities (OpenAI's `echo` with
 * `logprobs`) and vLLM's `prompt_logprobs`, which a stream does not carry (vLLM refuses one
 * that asks for alternatives, and ignores 0).
 */
/** vLLM's rule: usage in every chunk of a stream that asks for usage and for it to be continuous. */
export function continuousUsage(body: Pick<CompletionRequest, "stream_options">): boolean {
  return (
    body.stream_options?.include_usage === true &&
    body.stream_options?.continuous_usage_stats === true
  );
}

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
  const so = body.structured_outputs;
  const format = body.response_format;
  const asked = (
    [
      ["guided_choice", body.guided_choice && { guided_choice: body.guided_choice }],
      ["structured_outputs.choice", so?.choice && { guided_choice: so.choice }],
      ["guided_regex", body.guided_regex && { guided_regex: body.guided_regex }],
      ["structured_outputs.regex", so?.regex && { guided_regex: so.regex }],
      [
        "json_object",
        (format?.type === "json_object" || so?.json_object === true) && { json_object: true },
      ],
      [
        "response_format json_schema",
        format?.type === "json_schema" && { json_schema: format.json_schema.schema },
      ],
      ["guided_json", body.guided_json && { json_schema: body.guided_json }],
      ["structured_outputs.json", so?.json && { json_schema: so.json }],
      ["guided_grammar", body.guided_grammar && { guided_grammar: body.guided_grammar }],
      ["structured_outputs.grammar", so?.grammar && { guided_grammar: so.grammar }],
      ["a forced tool call", body.toolCall?.schema && { json_schema: body.toolCall.schema }],
    ] as Array<[string, Partial<SamplingParams> | false | null | undefined]>
  ).filter((entry): entry is [string, Partial<SamplingParams>] => Boolean(entry[1]));
  if (asked.length > 1)
    throw new FerryError(
      "INVALID_INPUT",
      `give one of ${asked.map(([kind]) => kind).join(", ")}, not several`,
    );
  const [kind, fields] = asked[0] ?? [];
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
 * Token ids a client gave (a prompt's, `logit_bias`'s keys) must name tokens the model has,
 * as vLLM requires; `what` names them in the refusal.
 */
/**
 * Refuses a text that cannot fit the model's context whatever its tokenizer, before it is
 * tokenized: a huge prompt costs the API no CPU.
 */
export function checkPromptChars(entry: ModelEntry, text: string): void {
  const context = entry.config.architecture?.context_length;
  if (typeof context === "number" && text.length > context * MAX_CHARS_PER_TOKEN)
    throw new FerryError(
      "INVALID_INPUT",
      `This model's maximum context length is ${context} tokens; the prompt has ${text.length} characters, far more than fit`,
    );
}

export function checkTokens(entry: ModelEntry, ids: readonly number[], what: string): void {
  const vocab = entry.config.architecture?.vocab_size;
  const unknown = outOfVocabulary(ids, typeof vocab === "number" ? vocab : undefined);
  if (unknown !== undefined)
    throw new FerryError(
      "INVALID_INPUT",
      `${what} ${unknown} is out of vocabulary (this model has ${vocab} tokens)`,
    );
}

/** A completion request's prompts, each text or token ids (OpenAI's four shapes of `prompt`). */
function promptsOf(prompt: CompletionRequest["prompt"]): Array<string | number[]> {
  if (typeof prompt === "string") return [prompt];
  // a list of numbers is one prompt's token ids; any other list is a list of prompts
  if (typeof prompt[0] === "number") return [prompt as number[]];
  return prompt as Array<string | number[]>;
}

/** Several choices' answers as one: each choice indexed by its place, usage summed. */
function joinAnswers<A extends CompletionResponse | ChatCompletionResponse>(
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
