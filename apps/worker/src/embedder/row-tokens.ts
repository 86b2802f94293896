import { type Tokenizer, withSpecials } from "@ferry/model-repository";
import {
  EMBED_MAX_CHARS_PER_TOKEN,
  EMBED_ROW,
  type RowInputs,
  tensorBytes,
  tensorFromBytes,
} from "@ferry/protocol";

/**
 * The token ids one embedding row is run on, or why it cannot be. The worker counts for
 * itself: the API's count decided admission, but a row is only ever run on what this
 * tokenizer makes of its text, and never past `maxTokens` (the graph's position table).
 * `truncate_prompt_tokens` keeps the last that many tokens, as vLLM's does, a text's special
 * tokens kept around them.
 */
export function rowTokens(
  inputs: RowInputs,
  tokenizer: Tokenizer,
  maxTokens: number,
): number[] | string {
  const truncateRaw = inputs[EMBED_ROW.truncate];
  const truncate =
    truncateRaw === undefined ? undefined : tensorFromBytes("INT64", tensorBytes(truncateRaw))[0];
  if (truncate !== undefined && !(Number.isInteger(truncate) && truncate >= 1))
    return `truncate_prompt_tokens must be a positive whole number, got ${truncate}`;
  if (truncate !== undefined && truncate > maxTokens)
    return `truncate_prompt_tokens value (${truncate}) is greater than max_model_len (${maxTokens}). Please, select a smaller truncation size.`;
  const text = inputs[EMBED_ROW.text];
  const idsRaw = inputs[EMBED_ROW.ids];
  if ((text === undefined) === (idsRaw === undefined))
    return `an embedding row carries either '${EMBED_ROW.text}' or '${EMBED_ROW.ids}'`;
  let ids: number[];
  if (idsRaw !== undefined) {
    const bytes = tensorBytes(idsRaw);
    if (bytes.length % 8 !== 0) return "input_ids is not a whole number of int64 values";
    ids = tensorFromBytes("INT64", bytes);
    const unknown = ids.find((id) => !Number.isInteger(id) || id < 0 || tokenizer.piece(id) === "");
    if (unknown !== undefined) return `token id ${unknown} is not in the model's vocabulary`;
    if (truncate !== undefined) ids = ids.slice(-truncate);
  } else {
    const decoded = tensorBytes(text as string).toString("utf8");
    // what the API refused before counting: a text no truncation would make fit is never tokenized
    if (decoded.length > maxTokens * EMBED_MAX_CHARS_PER_TOKEN)
      return `the input has ${decoded.length} characters, far more than ${maxTokens} tokens hold`;
    ids = withSpecials(tokenizer, decoded, truncate);
  }
  if (ids.length === 0) return "an input of no tokens has no embedding";
  if (ids.length > maxTokens)
    return `This model's maximum context length is ${maxTokens} tokens. However, you requested ${ids.length} tokens in the input for embedding generation. Please reduce the length of the input.`;
  return ids;
}
