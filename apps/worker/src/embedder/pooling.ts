import type { EmbeddingConfig } from "@ferry/protocol";
import type { TensorData, TensorMap } from "@ferry/runtime";

export type Pooling = EmbeddingConfig["pooling"];

/**
 * Rows of token ids as one batch: right-padded with 0 to the longest, an attention mask of
 * their real tokens, and token_type_ids of zeros (one segment) where the graph takes them.
 * Padding on the right keeps every row's positions as it would have alone, so a row's vector
 * does not depend on its batch.
 */
export function padBatch(rows: readonly (readonly number[])[], typeIds: boolean): TensorMap {
  const width = Math.max(1, ...rows.map((r) => r.length));
  const ids = new BigInt64Array(rows.length * width);
  const mask = new BigInt64Array(rows.length * width);
  rows.forEach((row, r) => {
    for (let t = 0; t < row.length; t++) {
      ids[r * width + t] = BigInt(row[t] as number);
      mask[r * width + t] = 1n;
    }
  });
  const dims = [rows.length, width];
  const feeds: TensorMap = {
    input_ids: { data: ids, dims },
    attention_mask: { data: mask, dims },
  };
  if (typeIds) feeds.token_type_ids = { data: new BigInt64Array(ids.length), dims: [...dims] };
  return feeds;
}

/**
 * One vector per row from the graph's output: hidden states [batch, sequence, hidden] pooled
 * over each row's `lengths[r]` real tokens (CLS: the first, mean: their average, last: the
 * last real one), or an output already pooled [batch, hidden] read as it is; each scaled to
 * unit length when `normalize`.
 */
export function poolRows(
  output: TensorData,
  lengths: readonly number[],
  pooling: Pooling,
  normalize: boolean,
): Float32Array[] {
  const data = output.data as Float32Array;
  const [, second = 0, third] = output.dims;
  const pooled = third === undefined;
  const hidden = pooled ? second : third;
  const seq = pooled ? 1 : second;
  return lengths.map((length, r) => {
    const at = r * seq * hidden;
    const vector = new Float32Array(hidden);
    if (pooled) vector.set(data.subarray(at, at + hidden));
    else if (pooling === "mean") {
      // summed in float64: a float32 running sum drifts from PyTorch's over long rows
      const sum = new Float64Array(hidden);
      for (let t = 0; t < length; t++) {
        const row = at + t * hidden;
        for (let h = 0; h < hidden; h++) sum[h] = (sum[h] as number) + (data[row + h] as number);
      }
      for (let h = 0; h < hidden; h++) vector[h] = (sum[h] as number) / Math.max(1, length);
    } else {
      const t = pooling === "cls" ? 0 : Math.max(0, length - 1);
      vector.set(data.subarray(at + t * hidden, at + (t + 1) * hidden));
    }
    return normalize ? unitLength(vector) : vector;
  });
}

/** `vector` scaled to length 1 (a zero vector stays zero), in place. */
export function unitLength(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const v of vector) norm += v * v;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let h = 0; h < vector.length; h++) vector[h] = (vector[h] as number) / norm;
  return vector;
}
