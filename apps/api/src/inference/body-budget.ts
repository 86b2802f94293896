import type { ModelConfig } from "@ferry/protocol";

/**
 * Bytes a request body may spend on each value of a model's input: a float's longest text (24
 * characters), its separator, and room for the nesting and indentation a pretty-printer adds.
 */
const BYTES_PER_VALUE = 64;
/** Room for everything else a body says (names, shapes, parameters). */
const BYTES_BESIDE = 64 * 1024;

/**
 * The most bytes a predict or v2 infer body for `config` may take, JSON or binary: its
 * largest batch of values, generously written. Checked before the body is read, so that 8 MiB
 * sent for 64 values is refused at once rather than parsed (a v2 body of that size had held
 * the API's loop 2-7 s before its shape was refused). Undefined where the inputs have no fixed
 * size (texts, a dimension of -1): the deployment's MAX_BODY_BYTES bounds those.
 */
export function tensorBodyBytes(config: ModelConfig): number | undefined {
  let values = 0;
  for (const input of config.inputs) {
    if (input.datatype === "BYTES" || input.dims.some((d) => d < 0)) return undefined;
    values += input.dims.reduce((a, b) => a * b, 1);
  }
  return BYTES_BESIDE + BYTES_PER_VALUE * Math.max(1, config.max_batch_size) * values;
}
