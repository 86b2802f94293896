import type { ModelRepository } from "@ferry/model-repository";
import { decodeChunkOutput, FerryError } from "@ferry/protocol";
import type { BatchJobStatus, InferenceClient } from "@ferry/transport";
import { assertVisible, type Tenant } from "../http/tenant.js";
import type { classify } from "../inference/classify.js";
import { renderRow, resultLines } from "./result-lines.js";

type Classify = typeof classify;
/** A stored chunk of answers rendered as its result lines (on the API's parse thread). */
export type RenderChunk = (chunkOutput: Buffer) => Promise<Uint8Array>;

/** Chunks of results rendered ahead of the one being sent: the thread works while the loop sends. */
const RENDER_AHEAD = 2;

/** Status, results and stored predictions, each visible to the tenant that made them. */
export class BatchJobReader {
  /**
   * `classify` reads a stored row's logits as predict's answers read them; `renderChunk`, when
   * given, renders a stored chunk's result lines off the event loop (else they are rendered on
   * it).
   */
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
    private readonly classify: Classify,
    private readonly renderChunk?: RenderChunk,
  ) {}

  async status(id: string, tenant: Tenant): Promise<BatchJobStatus> {
    const status = await this.client.batches.status(id);
    const notFound = () => new FerryError("NOT_FOUND", `Batch '${id}' not found`);
    if (!status) throw notFound();
    assertVisible(tenant, status.owner, notFound);
    return status;
  }

  /**
   * The batch's result lines (NDJSON, a prediction or an error per key), a page of whole lines
   * at a time, in its items' order.
   */
  async results(id: string, tenant: Tenant): Promise<AsyncGenerator<string | Uint8Array>> {
    await this.status(id, tenant);
    const classify = this.classify;
    const packed = await this.client.batchResults.chunkOutputs(id);
    if (packed) {
      const render =
        this.renderChunk ??
        (async (bytes: Buffer) => Buffer.from(resultLines(decodeChunkOutput(bytes), classify)));
      return renderedAhead(packed, render);
    }
    const pages = this.client.batchResults.results(id);
    return (async function* () {
      for await (const rows of pages)
        if (rows.length > 0)
          yield `${rows.map((row) => JSON.stringify(renderRow(row, classify))).join("\n")}\n`;
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
    return renderRow(stored, this.classify);
  }
}

/** Each chunk rendered, RENDER_AHEAD of them asked for before the one handed back is sent. */
async function* renderedAhead(
  chunks: AsyncGenerator<Buffer>,
  render: RenderChunk,
): AsyncGenerator<Uint8Array> {
  const ahead: Array<Promise<Uint8Array>> = [];
  try {
    for await (const bytes of chunks) {
      const page = render(bytes);
      // a reader that stops early leaves the renders it asked for ahead unread
      page.catch(() => undefined);
      ahead.push(page);
      if (ahead.length > RENDER_AHEAD) yield await (ahead.shift() as Promise<Uint8Array>);
    }
    while (ahead.length > 0) yield await (ahead.shift() as Promise<Uint8Array>);
  } finally {
    await chunks.return(undefined);
  }
}
