import type { ModelRepository } from "@ferry/model-repository";
import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  FerryError,
  type JobEvent,
  type SamplingParams,
} from "@ferry/protocol";
import type { InferenceClient, JobRecord } from "@ferry/transport";
import type { CompletionRequest, CompletionResponse } from "./schemas.js";

/** OpenAI's defaults for fields a request leaves out. */
const DEFAULT_MAX_TOKENS = 16;

/**
 * OpenAI-compatible completions on generator models: every completion is a job on the
 * model's queue, and its tokens come back through the job's event log.
 */
export class CompletionService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
  ) {}

  /** Validates a request and enqueues it; the returned record's id names the job. */
  async submit(body: CompletionRequest, requestId: string, priority?: number): Promise<JobRecord> {
    const { job, rank, maxQueueSize } = this.prepare(body, requestId, priority);
    return this.client.jobs.submitGenerate(job, rank, maxQueueSize);
  }

  /** Validates a request, enqueues it and follows its events (subscribed before it can run). */
  async follow(
    body: CompletionRequest,
    requestId: string,
    priority?: number,
    signal?: AbortSignal,
  ): Promise<{ record: JobRecord; events: AsyncGenerator<JobEvent>; close: () => void }> {
    const { job, rank, maxQueueSize } = this.prepare(body, requestId, priority);
    return this.client.jobs.submitGenerateFollowing(job, rank, maxQueueSize, signal);
  }

  private prepare(body: CompletionRequest, requestId: string, priority?: number) {
    const { entry, version } = this.repository.resolve(body.model);
    if (entry.config.kind !== "generator") {
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${body.model}' is a ${entry.config.kind}; use /v1/models/${body.model}/predict`,
      );
    }
    const prompt = typeof body.prompt === "string" ? body.prompt : (body.prompt[0] ?? "");
    if (prompt.length === 0) throw new FerryError("INVALID_INPUT", "prompt must not be empty");
    const params: SamplingParams = {
      max_tokens: body.max_tokens ?? DEFAULT_MAX_TOKENS,
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
    };
    const context =
      (entry.config.architecture?.context_length as number | undefined) ?? Number.POSITIVE_INFINITY;
    if (params.max_tokens >= context) {
      throw new FerryError(
        "INVALID_INPUT",
        `max_tokens must be below the model's context length ${context}`,
      );
    }
    return {
      job: {
        model: entry.config.name,
        version,
        prompt,
        params,
        deadline: Date.now() + (body.timeout_ms ?? entry.config.default_timeout_ms),
        meta: { format: "completion", request_id: requestId },
      },
      rank: priority ?? body.priority ?? DEFAULT_PRIORITY,
      maxQueueSize: entry.config.max_queue_size,
    };
  }

  /** Waits for the whole completion (no streaming). */
  async complete(
    body: CompletionRequest,
    requestId: string,
    priority?: number,
  ): Promise<CompletionResponse> {
    const { record: job, events, close } = await this.follow(body, requestId, priority);
    try {
      for await (const event of events) {
        if (event.body.type === "result")
          return this.render(
            job.id,
            job.model,
            job.created_at,
            event.body.result as CompletionResult,
          );
        if (event.body.type === "error") throw errorOf(event);
      }
    } finally {
      close();
    }
    throw new FerryError("UNAVAILABLE", "the job's event log ended without a result");
  }

  render(
    id: string,
    model: string,
    createdMs: number,
    result: CompletionResult,
  ): CompletionResponse {
    return {
      ...this.chunk(
        id,
        model,
        createdMs,
        result.text,
        result.finish_reason === "length" ? "length" : "stop",
      ),
      usage: result.usage,
    };
  }

  chunk(
    id: string,
    model: string,
    createdMs: number,
    text: string,
    finish: "stop" | "length" | null,
  ): CompletionResponse {
    return {
      id: `cmpl-${id}`,
      object: "text_completion",
      created: Math.floor(createdMs / 1000),
      model,
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
    };
  }
}

export function errorOf(event: JobEvent): FerryError {
  if (event.body.type !== "error") return new FerryError("INTERNAL", "not an error event");
  const { code, message } = event.body.error;
  return new FerryError(code as FerryError["code"], message);
}
