import type { ModelRepository } from "@ferry/model-repository";
import { FerryError, type StoredBatchRow } from "@ferry/protocol";
import type { BatchJobStatus, InferenceClient } from "@ferry/transport";
import { assertVisible, type Tenant } from "../http/tenant.js";
import type { classify } from "../inference/classify.js";

type Classify = typeof classify;

/** Status, results and stored predictions, each visible to the tenant that made them. */
export class BatchJobReader {
  /** `classify` reads a stored row's logits as predict's answers read them. */
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly classify: Classify,
  ) {}

  async status(id: string, tenant: Tenant): Promise<BatchJobStatus> {
    const status = await this.client.batches.status(id);
    const notFound = () => new FerryError("NOT_FOUND", `Batch '${id}' not found`);
    if (!status) throw notFound();
    assertVisible(tenant, status.owner, notFound);
    return status;
  }

  /** The batch's result lines (NDJSON, a prediction or an error per key), a page at a time. */
  async results(id: string, tenant: Tenant): Promise<AsyncGenerator<string[]>> {
    await this.status(id, tenant);
    const pages = this.client.batchResults.results(id);
    const classify = this.classify;
    return (async function* () {
      for await (const rows of pages)
        yield rows.map((row) => JSON.stringify(render(row, classify)));
    })();
  }

  /**
   * The stored answer for `key`, from the tenant's own batches; the admin names whose with
   * `owner` (a tenant id, as batch statuses show it), else reads the open tenant's.
   */
  async prediction(model: string, key: string, tenant: Tenant, owner?: string) {
    this.repository.get(model);
    const scope = tenant.admin ? (owner ?? "") : tenant.id;
    const stored = await this.client.batchResults.prediction(model, key, scope);
    if (!stored)
      throw new FerryError("NOT_FOUND", `No stored prediction for '${key}' of model '${model}'`);
    return render(stored, this.classify);
  }
}

/** A stored row as clients read it: the prediction from its logits, or its error. */
function render(row: StoredBatchRow, classify: Classify): Record<string, unknown> {
  if (!("logits" in row)) return row;
  const { logits, ...rest } = row;
  return {
    key: rest.key,
    ...classify(logits),
    model_version: rest.model_version,
    batch: rest.batch,
  };
}
