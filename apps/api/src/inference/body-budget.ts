import { EMBED_MAX_REQUEST_CHARS_PER_TOKEN, type ModelConfig } from "@ferry/protocol";

/**
 * Bytes a request body may spend on each value of a model's input: a float's longest text (24
 * characters), its separator, and room for the nesting and indentation a pretty-printer adds.
 */
const BYTES_PER_VALUE = 96;
/** Bytes beside each text of an embedder's request: its quotes and separator, or its length. */
const BYTES_PER_TEXT = 16;
/** Room for everything else a body says (names, shapes, parameters). */
const BYTES_BESIDE = 64 * 1024;

/**
 * The most bytes a predict or v2 infer body for `config` may take, JSON or binary: its
 * largest batch of values, generously written. Checked before the body is read, so that 8 MiB
 * sent for 64 values is refused at once rather than parsed (a v2 body of that size had held
 * the API's loop 2-7 s before its shape was refused), and an embedder's what its texts' budget
 * allows. Undefined where the inputs have no fixed size (a dimension of -1): the deployment's
 * MAX_BODY_BYTES bounds those.
 */
export function tensorBodyBytes(config: ModelConfig): number | undefined {
  // an embedder's texts, over v2: the characters one request may carry, each at most six
  // bytes as JSON writes it (`\uXXXX`), and a few more a text (quotes, lengths, brackets)
  if (config.embedding)
    return (
      BYTES_BESIDE +
      6 * config.embedding.max_request_tokens * EMBED_MAX_REQUEST_CHARS_PER_TOKEN +
      BYTES_PER_TEXT * config.embedding.max_inputs
    );
  let values = 0;
  for (const input of config.inputs) {
    if (input.datatype === "BYTES" || input.dims.some((d) => d < 0)) return undefined;
    values += input.dims.reduce((a, b) => a * b, 1);
  }
  return BYTES_BESIDE + BYTES_PER_VALUE * Math.max(1, config.max_batch_size) * values;
}
