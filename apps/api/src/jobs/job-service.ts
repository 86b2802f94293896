import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  FerryError,
  type InferReply,
  type JobEvent,
  type JobEventBody,
} from "@ferry/protocol";
import type { InferenceClient, JobRecord } from "@ferry/transport";
import type { z } from "@hono/zod-openapi";
import type { CallOptions } from "../http/call.js";
import { assertVisible, type Tenant, UNLISTED } from "../http/tenant.js";
import { type InferenceService, type Plan, toPrediction } from "../inference/inference-service.js";
import { predictBodySchema } from "../inference/schemas.js";
import { encodeV2Response, type RequestedOutput } from "../kserve-v2/codec.js";
import { v2InferRequestSchema } from "../kserve-v2/schemas.js";
import type { CompletionService } from "../openai/completion-service.js";
import { chatResponse, completionResponse } from "../openai/openai-render.js";
import { completionRequestSchema } from "../openai/schemas.js";
import type { jobBodySchema, jobRecordSchema } from "./schemas.js";

type JobBody = z.infer<typeof jobBodySchema>;
type JobView = z.infer<typeof jobRecordSchema>;

/** The format an async job's result is rendered in, chosen by the shape of its input. */
type JobFormat =
  | { format: "predict" }
  | { format: "v2"; outputs: Array<RequestedOutput | string>; id: string | undefined }
  | { format: "completion" }
  | { format: "chat" };

/**
 * Async submit-and-poll: an input in any of the sync shapes becomes a BullMQ job whose result
 * is rendered, when polled, exactly as the sync route would have answered.
 */
export class JobService {
  constructor(
    private readonly client: InferenceClient,
    private readonly inference: InferenceService,
    private readonly completions: CompletionService,
  ) {}

  /** `opts` carries the job-level priority and deadline (body fields, else headers). */
  async submit(body: JobBody, opts: CallOptions): Promise<JobRecord> {
    if ("prompt" in body.input) {
      const completion = completionRequestSchema.safeParse({ ...body.input, model: body.model });
      if (!completion.success)
        throw new FerryError("INVALID_INPUT", `input: ${completion.error.issues[0]?.message}`);
      const inner = completion.data;
      return this.completions.submit(inner, {
        ...opts,
        priority: opts.priority ?? inner.priority,
        timeoutMs: opts.timeoutMs ?? inner.timeout_ms,
        version: body.version,
      });
    }
    const { plan, format } = this.plan(body);
    const config = plan.entry.config;
    return this.client.jobs.submit({
      model: config.name,
      version: plan.version,
      rows: plan.rows,
      deadline: Date.now() + (opts.timeoutMs ?? config.default_timeout_ms),
      priority: opts.priority ?? DEFAULT_PRIORITY,
      maxQueueSize: config.max_queue_size,
      owner: opts.tenant.id,
      meta: { ...format, request_id: opts.requestId },
    });
  }

  async get(id: string, tenant: Tenant): Promise<JobView> {
    return this.view(await this.record(id, tenant));
  }

  async cancel(id: string, tenant: Tenant): Promise<JobView> {
    return this.view(await this.cancelled(id, tenant));
  }

  /** Cancels the job, if `tenant` may see it: a queued one never runs, a running one stops. */
  async cancelled(id: string, tenant: Tenant): Promise<JobRecord> {
    await this.record(id, tenant);
    const record = await this.client.jobs.cancel(id);
    if (!record) throw notFound(id);
    return record;
  }

  /** Deletes the job, if `tenant` may see it (see the transport's `delete`). */
  async deleted(id: string, tenant: Tenant): Promise<JobRecord> {
    await this.record(id, tenant);
    const record = await this.client.jobs.delete(id);
    if (!record) throw notFound(id);
    return record;
  }

  /** Removes an unlisted job once its request has its answer: nothing of it stays in Redis. */
  async forget(id: string): Promise<void> {
    await this.client.jobs.forget(id);
  }

  /**
   * The job's events after `after`, as clients see them: classifier results rendered as a
   * poll renders them, token ids (the workers' resume bookkeeping) left out.
   */
  async events(
    id: string,
    tenant: Tenant,
    after: string | undefined,
    signal: AbortSignal,
  ): Promise<AsyncGenerator<JobEvent>> {
    const record = await this.record(id, tenant);
    const events = this.client.jobs.events(record, after, signal);
    const shown = (body: JobEventBody) => this.shown(record, body);
    return (async function* () {
      for await (const event of events) yield { id: event.id, body: shown(event.body) };
    })();
  }

  /** The job, if `tenant` may see it; another tenant's job reads as unknown. */
  async record(id: string, tenant: Tenant): Promise<JobRecord> {
    const record = await this.client.jobs.get(id);
    if (!record || record.meta[UNLISTED] === true) throw notFound(id);
    assertVisible(tenant, record.owner, () => notFound(id));
    return record;
  }

  private shown(record: JobRecord, body: JobEventBody): JobEventBody {
    if (body.type === "token") {
      const { ids: _ids, ...rest } = body;
      return rest;
    }
    // a completion's result event keeps the worker's {text, finish_reason, usage}, as it
    // always has; a classifier's raw replies are rendered as its poll renders them
    const format = (record.meta as JobFormat).format;
    if (body.type === "result" && format !== "completion" && format !== "chat")
      return { type: "result", result: this.render({ ...record, result: body.result }) };
    return body;
  }

  private plan(body: JobBody): { plan: Plan; format: JobFormat } {
    const predict = predictBodySchema.safeParse(body.input);
    if (predict.success)
      return {
        plan: this.inference.planPredict(body.model, body.version, predict.data),
        format: { format: "predict" },
      };
    const v2 = v2InferRequestSchema.safeParse(body.input);
    if (v2.success) {
      const plan = this.inference.planV2(body.model, body.version, v2.data);
      return { plan, format: { format: "v2", outputs: plan.outputs, id: v2.data.id } };
    }
    throw new FerryError(
      "INVALID_INPUT",
      "input must be a predict body {features} or a v2 infer body {inputs}",
    );
  }

  private view(record: JobRecord): JobView {
    return {
      id: record.id,
      model: record.model,
      status: record.status,
      created_at: seconds(record.created_at),
      started_at: record.started_at === null ? null : seconds(record.started_at),
      finished_at: record.finished_at === null ? null : seconds(record.finished_at),
      result: record.result ? this.render(record) : null,
      error: record.error,
    };
  }

  private render(record: JobRecord): unknown {
    const meta = record.meta as JobFormat;
    if (meta.format === "completion")
      return completionResponse(record, record.result as CompletionResult);
    if (meta.format === "chat") return chatResponse(record, record.result as CompletionResult);
    const rows = (record.result as InferReply).results.map((r) => (r.ok ? r.outputs : {}));
    const plan = this.inference.planFor(record.model, record.version);
    if (meta.format === "v2")
      return encodeV2Response(
        plan.entry.config,
        record.version,
        meta.id ?? record.id,
        meta.outputs,
        rows,
      );
    const latency = (record.finished_at ?? Date.now()) - record.created_at;
    return { ...toPrediction(plan, rows[0] ?? {}), latency_ms: latency };
  }
}

function notFound(id: string): FerryError {
  return new FerryError("JOB_NOT_FOUND", `Job '${id}' not found`);
}

function seconds(ms: number): number {
  return Math.round(ms) / 1000;
}
