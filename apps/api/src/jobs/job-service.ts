import {
  type CompletionResult,
  DEFAULT_PRIORITY,
  FerryError,
  type InferReply,
  type JobEvent,
  type JobEventBody,
  type RowTiming,
} from "@ferry/protocol";
import type { InferenceClient, JobRecord } from "@ferry/transport";
import type { z } from "@hono/zod-openapi";
import type { CallOptions } from "../http/call.js";
import { assertVisible, oneOfSeveral, type Tenant, UNLISTED } from "../http/tenant.js";
import type { JobBody, JobKind, JobRows } from "./job-kind.js";
import type { jobRecordSchema } from "./schemas.js";

type JobView = z.infer<typeof jobRecordSchema>;

/**
 * Async submit-and-poll: an input in any of the sync shapes becomes a BullMQ job whose result
 * is rendered, when polled, exactly as the sync route would have answered.
 */
export class JobService {
  /** The kinds in the order they are tried: the first that takes an input makes its job. */
  constructor(
    private readonly client: InferenceClient,
    private readonly kinds: readonly JobKind[],
  ) {}

  /** `opts` carries the job-level priority and deadline (body fields, else headers). */
  async submit(body: JobBody, opts: CallOptions): Promise<JobRecord> {
    for (const kind of this.kinds) {
      const submission = kind.accept(body, opts);
      if (!submission) continue;
      if ("queued" in submission) return submission.queued;
      return this.submitRows(submission.plan, submission.meta, opts);
    }
    const shapes = this.kinds.map((k) => k.shape);
    throw new FerryError(
      "INVALID_INPUT",
      `input must be ${shapes.slice(0, -1).join(", ")}${shapes.length > 1 ? " or " : ""}${shapes.at(-1) ?? ""}`,
    );
  }

  private submitRows(
    plan: JobRows["plan"],
    meta: Record<string, unknown>,
    opts: CallOptions,
  ): Promise<JobRecord> {
    const config = plan.entry.config;
    return this.client.jobs.submit(
      {
        model: config.name,
        version: plan.version,
        rows: plan.rows,
        deadline: Date.now() + (opts.timeoutMs ?? config.default_timeout_ms),
        priority: opts.priority ?? DEFAULT_PRIORITY,
        maxQueueSize: config.max_queue_size,
        owner: opts.tenant.id,
        shared: oneOfSeveral(opts.tenant),
        meta: { ...meta, request_id: opts.requestId },
        trace: opts.trace,
      },
      opts.createdId,
    );
  }

  /** The job, if it exists and `tenant` may see it (a keyed retry looking for its first try's). */
  async find(id: string, tenant: Tenant): Promise<JobRecord | undefined> {
    return this.record(id, tenant).catch((err: unknown) => {
      if (err instanceof FerryError && err.code === "JOB_NOT_FOUND") return undefined;
      throw err;
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
    // a classifier's raw replies are rendered as its poll renders them
    if (body.type === "result" && !this.kindOf(record)?.rawResultEvents)
      return { type: "result", result: this.render({ ...record, result: body.result }) };
    return body;
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
      timings: timingsOf(record),
    };
  }

  private kindOf(record: JobRecord): JobKind | undefined {
    const format = record.meta.format;
    return this.kinds.find((k) => typeof format === "string" && k.formats.includes(format));
  }

  private render(record: JobRecord): unknown {
    const kind = this.kindOf(record);
    if (!kind) throw new FerryError("INTERNAL", `job ${record.id} has no renderer for its format`);
    return kind.render(record);
  }
}

/** A finished job's timings, from what its worker reported (absent from older workers). */
function timingsOf(record: JobRecord): JobView["timings"] {
  const result = record.result as Partial<InferReply & CompletionResult> | null;
  if (!result || record.finished_at === null) return null;
  const total_ms = Math.max(0, record.finished_at - record.created_at);
  if (result.timing) return { ...result.timing, total_ms };
  const rows = (result.results ?? []).flatMap((r) => (r.ok ? [r.timing] : []));
  if (rows.length === 0 || rows.some((t) => t.wait_ms === undefined)) return null;
  const slowest = (pick: (t: RowTiming) => number) => Math.max(...rows.map(pick));
  return {
    queue_ms: slowest((t) => t.wait_ms ?? 0),
    batch_ms: slowest((t) => t.queue_ms),
    infer_ms: slowest((t) => t.compute_ms),
    total_ms,
  };
}

function notFound(id: string): FerryError {
  return new FerryError("JOB_NOT_FOUND", `Job '${id}' not found`);
}

function seconds(ms: number): number {
  return Math.round(ms) / 1000;
}
