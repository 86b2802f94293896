import {
  loadTokenizer,
  type ModelEntry,
  type ModelRepository,
  type Tokenizer,
  tokenizerConfigSchema,
} from "@ferry/model-repository";
import { EMBED_OUTPUT, type EmbeddingConfig, FerryError, type OutputTensor } from "@ferry/protocol";
import type { CallOptions } from "../http/call.js";
import { wrongKind } from "../http/kind-routes.js";
import type { InferenceService } from "../inference/inference-service.js";
import { type EmbedInput, embeddingRows, inputsOf, truncationOf } from "./embedding-budgets.js";
import type { EmbeddingsRequest, EmbeddingsResponse } from "./embeddings-schemas.js";

/** What a request for `dimensions` and `truncate_prompt_tokens` asks of each vector. */
export interface EmbedOptions {
  dimensions?: number | undefined;
  truncate?: number | undefined;
}

/** A request's vectors, in input order, and the tokens the worker read for them. */
export interface Embedded {
  version: string;
  vectors: Float32Array[];
  promptTokens: number;
}

/**
 * Embeddings on embedder models, for OpenAI's `/v1/embeddings` and KServe v2 infer: inputs
 * checked against the model's budgets before anything is queued, one sync-lane row per input
 * on the classifier path (traffic split, deadline, stats), each answer cut to the width asked.
 */
export class EmbeddingsService {
  private readonly tokenizers = new WeakMap<ModelEntry, Promise<Tokenizer>>();

  constructor(
    private readonly repository: ModelRepository,
    private readonly inference: InferenceService,
  ) {}

  /** Whether `model` is an embedder (KServe v2 infer asks, to send it here). */
  serves(model: string): boolean {
    return this.repository.has(model) && this.repository.get(model).config.kind === "embedder";
  }

  async create(body: EmbeddingsRequest, opts: CallOptions): Promise<EmbeddingsResponse> {
    const inputs = inputsOf(body.input);
    const { dimensions, truncate_prompt_tokens: truncate } = body;
    const embedded = await this.embed(
      body.model,
      undefined,
      inputs,
      { dimensions, truncate },
      opts,
    );
    const base64 = body.encoding_format === "base64";
    return {
      object: "list",
      data: embedded.vectors.map((vector, index) => ({
        object: "embedding",
        index,
        embedding: base64 ? float32Base64(vector) : Array.from(vector),
      })),
      model: body.model,
      usage: { prompt_tokens: embedded.promptTokens, total_tokens: embedded.promptTokens },
    };
  }

  /** Each input's vector from `model` (at `version`, else as the traffic split routes it). */
  async embed(
    model: string,
    version: string | undefined,
    inputs: readonly EmbedInput[],
    options: EmbedOptions,
    opts: CallOptions,
  ): Promise<Embedded> {
    const entry = this.embedder(model);
    const embedding = entry.config.embedding as EmbeddingConfig;
    const width = widthOf(entry, embedding, options.dimensions);
    const truncate = truncationOf(options.truncate, embedding.max_tokens);
    const vocab = entry.config.architecture?.vocab_size;
    const { rows } = embeddingRows(
      embedding,
      await this.tokenizer(entry),
      inputs,
      truncate,
      typeof vocab === "number" ? vocab : undefined,
    );
    return this.inference.runWithin(
      model,
      version,
      opts,
      (v) => ({ ...this.repository.resolve(model, v), rows }),
      (plan, answers) => ({
        version: plan.version,
        vectors: answers.map((a) => cut(a, width, embedding.normalize)),
        // the worker's counts: what was run, not what the API guessed
        promptTokens: answers.reduce((n, a) => n + (a[EMBED_OUTPUT.tokens]?.data[0] ?? 0), 0),
      }),
    );
  }

  /** The width `model` answers when a request names none. */
  defaultWidth(model: string): number {
    const entry = this.embedder(model);
    return widthOf(entry, entry.config.embedding as EmbeddingConfig, undefined);
  }

  private embedder(model: string): ModelEntry {
    const entry = this.repository.get(model);
    if (entry.config.kind !== "embedder")
      throw new FerryError("INVALID_INPUT", wrongKind(model, entry.config.kind));
    return entry;
  }

  /** The model's tokenizer, loaded once per model.json (a reload's new entry loads it again). */
  tokenizer(entry: ModelEntry): Promise<Tokenizer> {
    let tokenizer = this.tokenizers.get(entry);
    if (!tokenizer) {
      tokenizer = loadTokenizer(entry.dir, tokenizerConfigSchema.parse(entry.config.tokenizer));
      this.tokenizers.set(entry, tokenizer);
    }
    return tokenizer;
  }
}

/**
 * The width a request gets: `dimensions` where the model was trained for it (Matryoshka),
 * else model.json's `dimensions`, else the whole hidden state. Messages are vLLM's.
 */
function widthOf(entry: ModelEntry, embedding: EmbeddingConfig, asked: number | undefined): number {
  const hidden = entry.config.outputs[0]?.dims.at(-1) ?? 0;
  const served = embedding.dimensions ?? hidden;
  if (asked === undefined) return served;
  const model = entry.config.name;
  const allowed = embedding.matryoshka_dimensions;
  if (!allowed)
    throw invalid(
      `Model "${model}" does not support matryoshka representation, changing output dimensions will lead to poor results.`,
    );
  if (asked < 1) throw invalid("dimensions can only be a positive integer.");
  if (!allowed.includes(asked))
    throw invalid(
      `Model "${model}" only supports ${JSON.stringify(allowed)} matryoshka dimensions, using other output dimensions will lead to poor results.`,
    );
  return asked;
}

/** A row's vector, its first `width` values, normalized again when the model normalizes. */
function cut(
  answer: Record<string, OutputTensor>,
  width: number,
  normalize: boolean,
): Float32Array {
  const data = answer[EMBED_OUTPUT.embedding]?.data ?? [];
  const vector = Float32Array.from(data.slice(0, width));
  if (!normalize || width >= data.length) return vector;
  let norm = 0;
  for (const v of vector) norm += v * v;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let k = 0; k < vector.length; k++) vector[k] = (vector[k] as number) / norm;
  return vector;
}

/** A vector as the openai client decodes `encoding_format: "base64"`: little-endian float32. */
export function float32Base64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let k = 0; k < vector.length; k++) bytes.writeFloatLE(vector[k] as number, k * 4);
  return bytes.toString("base64");
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
