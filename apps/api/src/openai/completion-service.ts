import { getMaxListeners, setMaxListeners } from "node:events";
import type { ModelEntry, ModelRepository, Tokenizer } from "@ferry/model-repository";
import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  FerryError,
  type JobEvent,
  pause,
} from "@ferry/protocol";
import { genAiOperation } from "@ferry/telemetry";
import type { EnqueueOptions, GenerateRequest, InferenceClient, JobRecord } from "@ferry/transport";
import type { CallOptions } from "../http/call.js";
import { errorOf, invalidInput } from "../http/errors.js";
import { wrongKind } from "../http/kind-routes.js";
import { refusalBackoffMs } from "../http/refusal-backoff.js";
import { oneOfSeveral } from "../http/tenant.js";
import type { TrafficRouter } from "../inference/traffic-router.js";
import type { ApiMetrics } from "../metrics.js";
import { ChatPrompts } from "./chat-prompts.js";
import type { ChatTemplateRequest } from "./chat-template.js";
import { continuousUsage, joinAnswers, severalChoices } from "./choices.js";
import { ContextWindow, DEFAULT_MAX_TOKENS } from "./context-window.js";
import { chatResponse, completionResponse } from "./openai-render.js";
import type { ChatCompletionResponse, CompletionResponse } from "./output-schemas.js";
import { promptsOf } from "./prompts.js";
import { type AsCompletion, samplingParamsOf } from "./sampling-params.js";
import {
  type ChatCompletionRequest as ChatRequest,
  type CompletionRequest,
  completionRequestSchema,
} from "./schemas.js";
import { checkScoreBudget, defaultMaxTokensWithin, scoreEntries } from "./score-budget.js";

/** Listeners one choice of several adds to its request's signal, and room for the rest. */
const LISTENERS_A_CHOICE = 4;
const LISTENERS_BESIDE = 10;

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
  private readonly context = new ContextWindow();
  private readonly chats: ChatPrompts;

  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly metrics: ApiMetrics,
    private readonly router: TrafficRouter,
    /** How long a followed completion's job is kept once done, unless `kept` (SYNC_JOB_TTL_S). */
    private readonly resumableForS?: number,
  ) {
    this.chats = new ChatPrompts(repository);
  }

  /** How long a completion followed to its end is kept (undefined: as long as async jobs). */
  private keepSecondsFor(opts: CallOptions): number | undefined {
    return opts.kept ? undefined : (opts.keepForS ?? this.resumableForS);
  }

  /** Counts a finished completion's tokens (what the dashboard's tokens/s is made of). */
  countTokens(job: JobRecord, result: CompletionResult): CompletionResult {
    this.metrics.completionTokens.inc({ model: job.model }, result.usage.completion_tokens);
    const labels = {
      gen_ai_operation_name: genAiOperation(job.meta.format),
      gen_ai_request_model: job.model,
    };
    const usage = this.metrics.genAiTokenUsage;
    usage.observe({ ...labels, gen_ai_token_type: "input" }, result.usage.prompt_tokens);
    usage.observe({ ...labels, gen_ai_token_type: "output" }, result.usage.completion_tokens);
    return result;
  }

  /** Another protocol's request (Triton's generate), checked as a completion request is. */
  check(raw: unknown): CompletionRequest {
    const checked = completionRequestSchema.safeParse(raw);
    if (!checked.success) throw invalidInput(checked.error.issues);
    return checked.data;
  }

  /** Validates a request and enqueues it; the returned record's id names the job. */
  async submit(
    body: CompletionRequest | ChatRequest,
    opts: CallOptions,
    meta?: Record<string, unknown>,
  ): Promise<JobRecord> {
    const { job, options } = await this.prepare(await this.chats.asCompletion(body), opts, meta);
    return this.client.jobs.submitGenerate(job, options, opts.createdId);
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
    const { job, options } = await this.prepare(await this.chats.asCompletion(body), opts, meta);
    return this.client.jobs.submitGenerateFollowing(
      job,
      { ...options, keepS: this.keepSecondsFor(opts) },
      signal,
    );
  }

  /**
   * Several choices (`severalChoices`), one job each, followed: all are validated before any is
   * queued, on the one version the request is routed to, and queued together or not at all (a
   * full queue, the key's share of it). Two requests of one key that fit its share one after
   * the other had collided halfway, a choice at a time, and both been refused. A batch line's
   * choices, which wait out full queues, are queued a choice at a time, the ones before kept.
   */
  async followEach(
    bodies: ReadonlyArray<CompletionRequest | ChatRequest>,
    opts: CallOptions,
    signal?: AbortSignal,
  ): Promise<FollowedCompletion[]> {
    const [first] = bodies;
    if (!first) return [];
    // drawn once: the canary split routes a request, not each of its choices
    const routed = { ...opts, version: await this.versionFor(first.model, opts.version) };
    const prepared = await Promise.all(
      bodies.map(async (body) =>
        this.prepare(await this.chats.asCompletion(body), routed, undefined, bodies.length),
      ),
    );
    checkScoreBudget(prepared.reduce((sum, { scores }) => sum + scores, 0));
    // each choice listens on the request's signal (its follow, its read, its result): a few
    // listeners a choice, at most MAX_CHOICES choices, not the leak Node warns of past 10
    if (signal)
      setMaxListeners(
        Math.max(getMaxListeners(signal), LISTENERS_BESIDE + LISTENERS_A_CHOICE * bodies.length),
        signal,
      );
    const keepS = this.keepSecondsFor(opts);
    const [{ options }] = prepared as [(typeof prepared)[number]];
    if (!opts.waitsOutFullQueues)
      return this.client.jobs.submitGenerateFollowingAll(
        prepared.map(({ job }) => job),
        { ...options, keepS },
        signal,
      );
    const followed: FollowedCompletion[] = [];
    try {
      for (const { job } of prepared)
        followed.push(await this.submitChoice(job, { ...options, keepS }, signal));
      return followed;
    } catch (err) {
      // the choices queued so far go before the refusal is answered: their places in the
      // queue (and in the key's share of it) are free for the retry it asks for
      await Promise.all(
        followed.map(async (one) => {
          one.close();
          await this.client.jobs.cancel(one.record.id).catch(() => undefined);
        }),
      );
      throw err;
    }
  }

  /**
   * Queues one choice of several and follows it; a batch line's choice refused by a full queue
   * waits for room and is sent again (`CallOptions.waitsOutFullQueues`), the ones before it kept.
   */
  private async submitChoice(
    job: GenerateRequest,
    options: EnqueueOptions,
    signal?: AbortSignal,
  ): Promise<FollowedCompletion> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.client.jobs.submitGenerateFollowing(job, options, signal);
      } catch (err) {
        const waits = err instanceof FerryError && err.code === "QUEUE_FULL";
        if (!waits || signal?.aborted) throw err;
        await pause(refusalBackoffMs(attempt, err), signal);
      }
    }
  }

  /** A chat's messages rendered by its model's template, once per request (`ChatPrompts`). */
  renderChat(body: ChatTemplateRequest & { model: string }): Promise<string> {
    return this.chats.render(body);
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
    /** The request's choices, which share its log-probability budget. */
    choices = 1,
  ) {
    const { entry, version } = this.repository.resolve(
      body.model,
      await this.versionFor(body.model, opts.version),
    );
    if (entry.config.kind !== "generator") {
      throw new FerryError("INVALID_INPUT", wrongKind(body.model, entry.config.kind));
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
    const maxTokensAsked =
      body.max_tokens ?? (body.format === "chat" ? undefined : DEFAULT_MAX_TOKENS);
    // vLLM's default for a completion; sent to the worker only where the tokenizer adds some
    const special =
      typeof prompt === "string" &&
      (body.add_special_tokens ?? true) &&
      (await this.context.tokenizer(entry)).addsSpecialTokens;
    const { maxTokens, promptTokens } = await this.context.fit(
      entry,
      prompt,
      maxTokensAsked,
      body.truncate_prompt_tokens ?? undefined,
      special,
    );
    const vocab = entry.config.architecture?.vocab_size;
    const { params, ask } = samplingParamsOf(body, {
      maxTokens,
      special,
      vocabSize: typeof vocab === "number" ? vocab : undefined,
    });
    // a prompt not counted (a model with no context length): its length, in characters or ids
    const counted = promptTokens ?? prompt.length;
    const as = { streamed: body.stream === true || opts.streamedLater === true };
    if (maxTokensAsked === undefined)
      params.max_tokens = defaultMaxTokensWithin(params, ask, counted, { ...as, choices });
    const scores = scoreEntries(params, ask, counted, as);
    checkScoreBudget(scores);
    return {
      scores,
      job: {
        model: entry.config.name,
        version,
        // ids past the truncation are never read: not queued (the worker cuts them too)
        ...(typeof prompt === "string"
          ? { prompt }
          : { prompt: "", prompt_ids: truncated(prompt, body.truncate_prompt_tokens) }),
        params,
        deadline: Date.now() + (opts.timeoutMs ?? entry.config.default_timeout_ms),
        // the worker's generation spans join the request's trace (nothing when tracing is off)
        ...(opts.trace ? { trace: opts.trace } : {}),
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
        shared: oneOfSeveral(opts.tenant),
      },
    };
  }

  /** The model's tokenizer, loaded once. */
  tokenizer(entry: ModelEntry): Promise<Tokenizer> {
    return this.context.tokenizer(entry);
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
    return this.answer(body, await this.follow(body, opts, signal), signal, opts);
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
      const answers = await Promise.all(
        followed.map((one) => this.answer(body, one, stop.signal, opts)),
      );
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
    { timing, jobs }: Pick<CallOptions, "timing" | "jobs"> = {},
  ): Promise<CompletionResponse | ChatCompletionResponse> {
    const render = "messages" in body ? chatResponse : completionResponse;
    // named before the wait, so in the prompts' order (the answer's id is the first's), not
    // in the order they finish; a call that fails names none (X-Job-Id is for answers)
    jobs?.push(job.id);
    const result = await this.result({ record: job, events, close }, signal);
    timing?.generation(result.timing);
    return render(job, result);
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
          return this.countTokens(job, event.body.result as CompletionResult);
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

/** A prompt's ids as `truncate_prompt_tokens` reads them: the last that many. */
function truncated(ids: number[], keep: number | null | undefined): number[] {
  return keep == null || ids.length <= keep ? ids : ids.slice(-keep);
}
