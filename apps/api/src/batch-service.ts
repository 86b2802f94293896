import type { ModelRepository } from "@ferry/model-repository";
import { BATCH_CHUNK_SIZE, type BatchItem, encodeTensor, FerryError } from "@ferry/protocol";
import type { InferenceClient } from "@ferry/transport";

/** One line of a batch: a key and the model's input row. */
export interface RawItem {
  key: unknown;
  features: unknown;
}

/**
 * Offline batch prediction (the seed's BatchPredictor): items are checked and encoded as they
 * arrive and queued a chunk at a time, so a batch of any size passes through the API in
 * bounded memory.
 */
export class BatchService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly client: InferenceClient,
  ) {}

  /** Ingests `items` (an async stream of raw items); returns the batch id and its size. */
  async ingest(
    model: string,
    version: string | undefined,
    items: AsyncIterable<RawItem>,
  ): Promise<{ id: string; total: number }> {
    const { entry, version: v } = this.repository.resolve(model, version);
    const spec = entry.config.inputs[0];
    if (entry.config.kind !== "classifier" || !spec || entry.config.inputs.length !== 1) {
      throw new FerryError("INVALID_INPUT", `Model '${model}' does not take batch predictions`);
    }
    const width = spec.dims.reduce((a, b) => a * b, 1);
    const batches = this.client.batches;
    const id = await batches.create(model, v);
    let chunk: BatchItem[] = [];
    let total = 0;
    try {
      for await (const raw of items) {
        total++;
        const features = raw.features;
        if (typeof raw.key !== "string" || raw.key === "")
          throw invalidItem(total, "needs a string key");
        if (
          !Array.isArray(features) ||
          features.length !== width ||
          !features.every((x) => typeof x === "number" && Number.isFinite(x))
        ) {
          throw invalidItem(total, `needs ${width} finite features`);
        }
        chunk.push({
          key: raw.key,
          inputs: { [spec.name]: encodeTensor(spec.datatype, features as number[]) },
        });
        if (chunk.length >= BATCH_CHUNK_SIZE) {
          await batches.addChunk(id, model, v, chunk);
          chunk = [];
        }
      }
      if (chunk.length > 0) await batches.addChunk(id, model, v, chunk);
    } finally {
      // what was queued runs either way; the batch completes with the items it took
      await batches.seal(id);
    }
    if (total === 0) throw new FerryError("INVALID_INPUT", "a batch needs at least one item");
    return { id, total };
  }
}

function invalidItem(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `item ${line} ${problem}`);
}

/** Parses an NDJSON byte stream line by line, holding one partial line at most. */
export async function* ndjsonItems(body: ReadableStream<Uint8Array>): AsyncGenerator<RawItem> {
  const decoder = new TextDecoder();
  let buffered = "";
  let line = 0;
  const parse = (text: string): RawItem => {
    line++;
    try {
      return JSON.parse(text) as RawItem;
    } catch {
      throw new FerryError("INVALID_INPUT", `line ${line} is not valid JSON`);
    }
  };
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      const text = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (text) yield parse(text);
      newline = buffered.indexOf("\n");
    }
  }
  const rest = (buffered + decoder.decode()).trim();
  if (rest) yield parse(rest);
}
