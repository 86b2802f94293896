import { type CompletionResult, FerryError } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import type { CallOptions } from "../http/call.js";
import { invalidInput } from "../http/errors.js";
import { IdleWaiters } from "../http/idle-waiters.js";
import type { Tenant } from "../http/tenant.js";
import { UNLISTED } from "../http/tenant.js";
import type { JobService } from "../jobs/job-service.js";
import type { CompletionService, FollowedCompletion } from "./completion-service.js";
import {
  answerTurn,
  type ConversationMessage,
  inputItems,
  jobIdOf,
  type ResponsesMeta,
  responseId,
  responseObject,
  responsesMetaOf,
} from "./responses-render.js";
import type { ResponsesRequest } from "./responses-schemas.js";
import { type ChatCompletionRequest, chatCompletionRequestSchema } from "./schemas.js";

/** A page of a response's input items: OpenAI's list parameters. */
export interface ItemsPage {
  after?: string | undefined;
  limit: number;
  order: "asc" | "desc";
}

/** A Responses API request as the chat completion it runs, and what its job keeps. */
export interface PreparedResponse {
  chat: ChatCompletionRequest;
  meta: ResponsesMeta;
}

/**
 * OpenAI's Responses API on Ferry's chat: a request becomes the chat completion of its
 * conversation (the one `previous_response_id` names, then this input), run as every chat
 * runs; its job keeps the conversation, so that the response can be read back
 * (`GET /v1/responses/{id}`) and continued, for as long as jobs are kept.
 */
export class ResponsesService {
  /** Forgets under way: a stream ends without waiting for its own, a drain waits for all. */
  private readonly forgetting = new Set<Promise<void>>();
  private readonly idle = new IdleWaiters();

  constructor(
    private readonly completions: CompletionService,
    private readonly jobs: JobService,
  ) {}

  async prepare(body: ResponsesRequest, tenant: Tenant): Promise<PreparedResponse> {
    const earlier = body.previous_response_id
      ? await this.continued(body.previous_response_id, tenant)
      : [];
    const conversation = [...earlier, ...messagesOf(body.input)];
    const format = body.text?.format;
    const chat = chatCompletionRequestSchema.safeParse({
      model: body.model,
      // instructions lead this turn only (OpenAI's rule: they do not carry over)
      messages: [
        ...(body.instructions ? [{ role: "system", content: body.instructions }] : []),
        ...conversation,
      ],
      max_completion_tokens: body.max_output_tokens,
      temperature: body.temperature,
      top_p: body.top_p,
      // a background response's events are read from its job's log, not followed
      stream: body.stream && !body.background,
      response_format:
        format?.type === "json_schema"
          ? {
              type: "json_schema",
              json_schema: {
                name: format.name,
                schema: format.schema,
                description: format.description,
                strict: format.strict,
              },
            }
          : format,
      tools: body.tools?.map((tool) => ({
        type: "function",
        function: {
          name: tool.name,
          description: tool.description ?? undefined,
          parameters: tool.parameters ?? undefined,
        },
      })),
      tool_choice:
        typeof body.tool_choice === "object" && body.tool_choice !== null
          ? { type: "function", function: { name: body.tool_choice.name } }
          : body.tool_choice,
      parallel_tool_calls: body.parallel_tool_calls,
      // the model's own log probabilities of the text, as the chat gives them
      ...(body.include?.includes("message.output_text.logprobs")
        ? { logprobs: true, top_logprobs: body.top_logprobs ?? 0 }
        : {}),
      priority: body.priority,
      timeout_ms: body.timeout_ms,
    });
    if (!chat.success) throw invalidInput(chat.error.issues);
    return {
      chat: chat.data,
      meta: {
        conversation,
        echo: {
          instructions: body.instructions ?? null,
          max_output_tokens: body.max_output_tokens ?? null,
          previous_response_id: body.previous_response_id ?? null,
          temperature: body.temperature ?? 1,
          top_p: body.top_p ?? 1,
          text: { format: format ?? { type: "text" } },
          metadata: body.metadata ?? {},
          user: body.user ?? null,
          store: body.store ?? true,
          background: body.background ?? false,
          parallel_tool_calls: body.parallel_tool_calls ?? true,
          top_logprobs: body.top_logprobs ?? 0,
          tools: body.tools ?? [],
          tool_choice: body.tool_choice ?? ((body.tools ?? []).length > 0 ? "auto" : "none"),
        },
      },
    };
  }

  /** Queues the response's chat and follows it. */
  follow(
    prepared: PreparedResponse,
    opts: CallOptions,
    signal?: AbortSignal,
  ): Promise<FollowedCompletion> {
    // a stored response is read back and continued for as long as jobs are kept
    const kept = { ...opts, kept: prepared.meta.echo.store };
    return this.completions.follow(prepared.chat, kept, signal, jobMeta(prepared));
  }

  /**
   * A `store: false` response's job, once answered (or given up): nothing of it stays. Never
   * rejects. A forget waits for a running job's worker to let go (seconds, for a worker that
   * is slow to), so a stream hands its slot back and ends without waiting for it; a drain
   * waits for them all (`forgotten`), or what the job wrote would stay its time.
   */
  forget(prepared: PreparedResponse, jobId: string): Promise<void> {
    if (prepared.meta.echo.store) return Promise.resolve();
    const forgetting: Promise<void> = this.jobs
      .forget(jobId)
      .catch(() => undefined)
      .finally(() => {
        this.forgetting.delete(forgetting);
        if (this.forgetting.size === 0) this.idle.wake();
      });
    this.forgetting.add(forgetting);
    return forgetting;
  }

  /** Resolves once no forget is under way, or after `timeoutMs`. */
  forgotten(timeoutMs: number): Promise<void> {
    return this.idle.wait(this.forgetting.size === 0, timeoutMs);
  }

  /**
   * Runs a response to its end: the response object, completed or incomplete. In the
   * background, it is queued as an async job and answered at once, `queued`.
   */
  async create(body: ResponsesRequest, opts: CallOptions, signal?: AbortSignal) {
    const prepared = await this.prepare(body, opts.tenant);
    if (body.background) return responseObject(await this.queue(prepared, opts), prepared.meta);
    const followed = await this.follow(prepared, opts, signal);
    try {
      const result = await this.completions.result(followed, signal);
      opts.timing?.generation(result.timing);
      opts.jobs?.push(followed.record.id);
      return responseObject(followed.record, prepared.meta, result);
    } finally {
      await this.forget(prepared, followed.record.id);
    }
  }

  /** Queues a background response: an async job, which outlives the request. */
  async queue(prepared: PreparedResponse, opts: CallOptions): Promise<JobRecord> {
    if (!prepared.meta.echo.store)
      throw new FerryError("INVALID_INPUT", "background mode needs store: true (it is read back)");
    return this.completions.submit(
      prepared.chat,
      { ...opts, streamedLater: true },
      { responses: prepared.meta },
    );
  }

  /** A stored background response, whose events can be streamed again from its start. */
  async streamable(id: string, tenant: Tenant): Promise<{ job: JobRecord; meta: ResponsesMeta }> {
    const job = await this.stored(id, tenant);
    const meta = responsesMetaOf(job) as ResponsesMeta;
    if (!meta.echo.background)
      throw new FerryError(
        "INVALID_INPUT",
        "This response cannot be streamed because it was not created with background=true.",
      );
    return { job, meta };
  }

  /** A response read back: as it stands (queued, in progress), or as it ended. */
  async get(id: string, tenant: Tenant) {
    return storedObject(await this.stored(id, tenant));
  }

  /** Cancels a response: a background one still queued never runs, one running stops. */
  async cancel(id: string, tenant: Tenant) {
    const job = await this.stored(id, tenant);
    if (responsesMetaOf(job)?.echo.background !== true)
      throw new FerryError(
        "INVALID_INPUT",
        "Only responses created with background=true can be cancelled",
      );
    return storedObject(await this.jobs.cancelled(job.id, tenant));
  }

  /**
   * The items a response was given (its conversation), a page at a time as OpenAI pages lists:
   * newest first unless `order` is "asc", from after the item `after` names.
   */
  async inputItems(id: string, tenant: Tenant, page: ItemsPage) {
    const job = await this.stored(id, tenant);
    const all = inputItems(job, responsesMetaOf(job) as ResponsesMeta);
    if (page.order !== "asc") all.reverse();
    let from = 0;
    if (page.after !== undefined) {
      from = all.findIndex((item) => item.id === page.after) + 1;
      if (from === 0)
        throw new FerryError(
          "INVALID_INPUT",
          `No item with id '${page.after}' in this response's input`,
        );
    }
    const data = all.slice(from, from + page.limit);
    return {
      object: "list" as const,
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: from + data.length < all.length,
    };
  }

  /**
   * Deletes a stored response: it reads as unknown from now on, and cannot be continued. One
   * still queued or running is cancelled first.
   */
  async delete(id: string, tenant: Tenant) {
    const job = await this.stored(id, tenant);
    await this.jobs.deleted(job.id, tenant);
    return { id: responseId(job.id), object: "response" as const, deleted: true as const };
  }

  /** The conversation a new response continues: the earlier one's, and its answer. */
  private async continued(id: string, tenant: Tenant): Promise<ConversationMessage[]> {
    const job = await this.stored(id, tenant);
    const result = job.result as CompletionResult | null;
    if (job.status !== "succeeded" || !result)
      throw new FerryError(
        "INVALID_INPUT",
        `Previous response '${id}' has not completed (it is ${job.status}); continue it once it has`,
      );
    const meta = responsesMetaOf(job) as ResponsesMeta;
    return [...meta.conversation, answerTurn(job, result)];
  }

  /** A stored response's job; one not stored (`store: false`), or another tenant's, is unknown. */
  private async stored(id: string, tenant: Tenant): Promise<JobRecord> {
    const unknown = () => new FerryError("NOT_FOUND", `Response with id '${id}' not found.`);
    const jobId = jobIdOf(id);
    if (!jobId) throw unknown();
    const job = await this.jobs.record(jobId, tenant).catch((err: unknown) => {
      throw err instanceof FerryError && err.code === "JOB_NOT_FOUND" ? unknown() : err;
    });
    if (responsesMetaOf(job)?.echo.store !== true) throw unknown();
    return job;
  }
}

/**
 * What a response's job keeps beside its chat: the conversation and the echoed request (read
 * back by GET /v1/responses), and, for a `store: false` one, the mark that keeps it unlisted.
 */
export function jobMeta(prepared: PreparedResponse): Record<string, unknown> {
  return prepared.meta.echo.store
    ? { responses: prepared.meta }
    : { responses: prepared.meta, [UNLISTED]: true };
}

/** A stored response's object, from its job as it stands. */
function storedObject(job: JobRecord) {
  const result = (job.result ?? undefined) as CompletionResult | undefined;
  return responseObject(job, responsesMetaOf(job) as ResponsesMeta, result);
}

/**
 * A request's input as chat messages: a string is one user message, parts' texts are joined,
 * function calls (an earlier answer's, sent back) join the assistant's turn they follow or
 * make one, and a call's output is the tool's message answering it.
 */
function messagesOf(input: ResponsesRequest["input"]): ConversationMessage[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: ConversationMessage[] = [];
  for (const item of input) {
    if (item.type === "function_call") {
      const call = {
        id: item.call_id ?? "",
        type: "function" as const,
        function: { name: item.name ?? "", arguments: item.arguments ?? "" },
      };
      const last = messages.at(-1);
      if (last?.role === "assistant") last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (item.type === "function_call_output")
      messages.push({ role: "tool", content: item.output ?? "", tool_call_id: item.call_id ?? "" });
    else
      messages.push({
        role: item.role ?? "user",
        content:
          typeof item.content === "string"
            ? item.content
            : (item.content ?? []).map((part) => part.text ?? "").join(""),
      });
  }
  return messages;
}
