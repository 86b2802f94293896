import { FerryError, type ModelConfig } from "@ferry/protocol";
import type { V2InferRequest, V2InferResponse } from "./schemas.js";

/**
 * KServe v2 on an embedder, as a Triton ensemble with its tokenizer inside reads: one BYTES
 * input of texts, batch axis first ([n] or [n, 1], any name: "text" in its metadata), one
 * FP32 output `embedding` [n, width]. The graph's own tensors (token ids, hidden states)
 * are the worker's business.
 */
export const EMBEDDER_V2 = { input: "text", output: "embedding" } as const;

/** The tensors an embedder's v2 metadata and config show. */
export function embedderTensors(config: ModelConfig) {
  const width = config.embedding?.dimensions ?? config.outputs[0]?.dims.at(-1) ?? -1;
  return {
    inputs: [{ name: EMBEDDER_V2.input, datatype: "BYTES", dims: [1] }],
    outputs: [{ name: EMBEDDER_V2.output, datatype: "FP32", dims: [width] }],
  };
}

/** The texts of a v2 request to an embedder, or a 400 that says what it should have sent. */
export function embedderTexts(body: V2InferRequest): string[] {
  const [input, ...more] = body.inputs;
  if (!input || more.length > 0)
    throw invalid(
      `an embedding model takes one BYTES input of texts; got ${body.inputs.length} inputs`,
    );
  if (input.datatype !== "BYTES")
    throw invalid(`input '${input.name}' has datatype ${input.datatype}, expected BYTES (texts)`);
  const [rows = 0, ...rest] = input.shape;
  if (rest.length > 1 || (rest.length === 1 && rest[0] !== 1))
    throw invalid(
      `input '${input.name}' has shape [${input.shape.join(",")}], expected [-1] or [-1,1]`,
    );
  if (rows === 0) throw invalid("batch size must be at least 1");
  // a row a text, flat or one deep: counted before anything is flattened
  const texts = input.data.length === rows ? input.data.flat(2) : input.data;
  if (texts.length !== rows)
    throw invalid(
      `input '${input.name}' has ${texts.length} values, shape [${input.shape.join(",")}] needs ${rows}`,
    );
  if (!texts.every((t): t is string => typeof t === "string"))
    throw invalid(`input '${input.name}' holds a value that is not a string`);
  const [output, ...others] = body.outputs ?? [];
  if (output) {
    if (output.name !== EMBEDDER_V2.output)
      throw invalid(`unknown output '${output.name.slice(0, 64)}'`);
    if (others.length > 0)
      throw invalid(`an embedding model has one output, '${EMBEDDER_V2.output}', asked for once`);
    // as a classifier's: a parameter that would change the answer and that Ferry lacks is a
    // 400 (the vectors had come back plain whatever was asked)
    for (const key of Object.keys(output.parameters ?? {}))
      if (key !== "binary_data")
        throw invalid(
          `output '${output.name}': parameter '${key}' is not supported by this server`,
        );
  }
  return texts;
}

/** The vectors as v2's output tensor, batch axis first. */
export function embedderResponse(
  model: string,
  version: string,
  id: string,
  vectors: readonly Float32Array[],
): V2InferResponse {
  const width = vectors[0]?.length ?? 0;
  return {
    model_name: model,
    model_version: version,
    id,
    outputs: [
      {
        name: EMBEDDER_V2.output,
        datatype: "FP32",
        shape: [vectors.length, width],
        data: vectors.flatMap((v) => Array.from(v)),
      },
    ],
  };
}

function invalid(message: string): FerryError {
  return new FerryError("INVALID_INPUT", message);
}
