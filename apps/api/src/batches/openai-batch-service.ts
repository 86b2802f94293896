import { randomUUID } from "node:crypto";
import { FerryError } from "@ferry/protocol";
import type { InferenceClient, ListPage, OpenAiBatchState } from "@ferry/transport";
import type { FileService } from "../files/file-service.js";
import { endpointOf, urlFits } from "../http/batch-endpoints.js";
import { canSee, type Tenant } from "../http/tenant.js";
import { failBatch, finalizeBatch } from "./batch-finalizer.js";
import { batchObject, type OpenAiBatchRequest } from "./openai-batch-object.js";

/** The longest completion window taken (OpenAI takes "24h" only). */
const MAX_WINDOW_S = 168 * 3_600;
const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3_600 };

/** A completion window ("24h", "90m", "30s") in seconds. */
export function windowSeconds(window: string): number {
  const parsed = /^([1-9][0-9]{0,6})([smh])$/.exec(window);
  const seconds = parsed ? Number(parsed[1]) * (UNIT_S[parsed[2] ?? ""] ?? 0) : 0;
  if (seconds === 0 || seconds > MAX_WINDOW_S)
    throw new FerryError(
      "INVALID_INPUT",
      `completion_window: "${window}" is not a window; "24h", or any "<n>s", "<n>m" or "<n>h" up to 168h`,
    );
  return seconds;
}

/**
 * OpenAI's Batch API: a batch of an uploaded file's lines on one endpoint, run by whichever API
 * replica's runner takes it (`OpenAiBatchRunner`); each batch belongs to the tenant that made
 * it, and another's reads as unknown.
 */
export class OpenAiBatchService {
  constructor(
    private readonly client: InferenceClient,
    private readonly files: FileService,
    /** How long a batch and its files are kept once it ends, in s (JOB_TTL_S). */
    private readonly ttlS: number,
  ) {}

  /**
   * Checks a batch against its input file and queues it to run; `createdId` names it for a
   * keyed request (a retry after its replica died finds the first's, not a second).
   */
  async create(body: OpenAiBatchRequest, tenant: Tenant, createdId?: string) {
    const id = `batch_${(createdId ?? randomUUID()).replaceAll("-", "")}`;
    if (createdId) {
      const earlier = await this.client.openAiBatches.get(id);
      if (earlier) return batchObject(earlier);
    }
    const windowS = windowSeconds(body.completion_window);
    const endpoint = body.endpoint;
    if (endpointOf(endpoint) === undefined && endpoint !== "/v1/models/{model}/predict")
      throw new FerryError(
        "INVALID_INPUT",
        `endpoint: ${endpoint} takes no batches; /v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings or /v1/models/{name}/predict`,
      );
    const file = await this.files.stored(body.input_file_id, tenant);
    if (file.purpose !== "batch")
      throw new FerryError(
        "INVALID_INPUT",
        `input_file_id: file ${file.id} has purpose ${file.purpose}; a batch reads a file uploaded with purpose "batch"`,
      );
    const stray = file.urls.find((url) => !urlFits(url, endpoint));
    if (stray !== undefined)
      throw new FerryError(
        "INVALID_INPUT",
        `input_file_id: the file's lines name url ${stray}, not this batch's endpoint ${endpoint}`,
      );
    await this.files.assertRoomForAnswers(tenant);
    const now = Math.floor(Date.now() / 1000);
    // the batch may run its whole window, then is kept as long as finished jobs are
    const keepS = windowS + this.ttlS;
    await this.client.files.keep(file.id, keepS);
    await this.client.storage.extend(file.owner, file.id, now + keepS);
    const batch = await this.client.openAiBatches.create(
      {
        id,
        owner: tenant.id,
        endpoint,
        input_file_id: file.id,
        completion_window: body.completion_window,
        created_at: now,
        expires_at: now + windowS,
        total: file.lines,
        metadata: body.metadata ?? null,
      },
      keepS,
    );
    return batchObject(batch);
  }

  async get(id: string, tenant: Tenant) {
    return batchObject(await this.expiredIfWaiting(await this.visible(id, tenant)));
  }

  /**
   * A batch still waiting for a runner past the end of its window is expired by whoever looks
   * at it (its runner would expire it only once it began): the same claim and fenced finalizer
   * as a cancel of one not begun.
   */
  private async expiredIfWaiting(batch: OpenAiBatchState): Promise<OpenAiBatchState> {
    if (batch.status !== "validating" || Date.now() < batch.expires_at * 1000) return batch;
    const store = this.client.openAiBatches;
    await this.endUnbegun(batch.id, "finalizing");
    return (await store.get(batch.id)) ?? batch;
  }

  /**
   * Ends a batch no runner has begun, if it still is one (`validating`), from `to`: its files
   * written on this process, not left until a runner is free. A runner that takes it later
   * finds it ended, or in `to` and not to be run (two finalizers are fenced apart as a
   * takeover's are); if this process dies first, that runner ends it. Whether it was.
   */
  private async endUnbegun(id: string, to: "cancelling" | "finalizing"): Promise<boolean> {
    if (!(await this.client.openAiBatches.transition(id, ["validating"], to))) return false;
    void finalizeBatch(this.client, id, this.ttlS, failBatch(this.client, this.ttlS)).catch(
      () => undefined,
    );
    return true;
  }

  /** The tenant's batches, newest first, as OpenAI pages them. */
  async list(tenant: Tenant, page: ListPage) {
    const { data, hasMore } = await this.client.openAiBatches.list(tenant.id, page);
    const batches = (await Promise.all(data.map((b) => this.expiredIfWaiting(b)))).map(batchObject);
    return {
      object: "list" as const,
      data: batches,
      first_id: batches[0]?.id ?? null,
      last_id: batches.at(-1)?.id ?? null,
      has_more: hasMore,
    };
  }

  /**
   * Cancels a batch: it is `cancelling` until its runner has stopped its lines (those queued
   * never run, those running stop) and written what was answered, then `cancelled`; one no
   * runner has begun is `cancelled` at once (its lines, none run, in its error file).
   */
  async cancel(id: string, tenant: Tenant) {
    const batch = await this.visible(id, tenant);
    const store = this.client.openAiBatches;
    // one no runner has begun (every runner busy with batches of its own) ends now
    if (await this.endUnbegun(id, "cancelling")) return this.get(id, tenant);
    const moved = await store.transition(id, ["in_progress"], "cancelling");
    if (!moved) {
      const now = (await store.get(id)) ?? batch;
      if (now.status !== "cancelling" && now.status !== "cancelled")
        throw new FerryError(
          "INVALID_INPUT",
          `Cannot cancel a batch with status ${now.status}: it has finished its lines`,
        );
    }
    return this.get(id, tenant);
  }

  private async visible(id: string, tenant: Tenant) {
    const batch = await this.client.openAiBatches.get(id);
    if (!batch || !canSee(tenant, batch.owner))
      throw new FerryError("NOT_FOUND", `No batch found with id '${id}'`);
    return batch;
  }
}
