import type { ChunkOutput, StoredBatchRow } from "@ferry/protocol";
import type { classify } from "../inference/classify.js";

type Classify = typeof classify;

/** A stored row as clients read it: the prediction from its logits, or its error. */
export function renderRow(row: StoredBatchRow, classify: Classify): Record<string, unknown> {
  if (!("logits" in row)) return row;
  return predictionRow(row.key, row.logits, row.model_version, row.batch, classify);
}

/** An answered row as clients read it. */
function predictionRow(
  key: string,
  logits: readonly number[],
  modelVersion: string,
  batch: string,
  classify: Classify,
): Record<string, unknown> {
  return { key, ...classify(logits), model_version: modelVersion, batch };
}

/**
 * A chunk's results as NDJSON (each line ended), in its rows' order: what `renderRow` gives
 * each row, read straight from the packed values. Rendering is most of reading a batch's
 * results back (a JSON number of 17 digits takes longer to print than its row took to run),
 * so the API does it on its parse thread, beside the loop that sends the bytes.
 */
export function resultLines(out: ChunkOutput, classify: Classify): string {
  const { width, values, errors } = out;
  const lines = new Array<string>(out.keys.length);
  const logits = new Array<number>(width);
  for (let r = 0; r < out.keys.length; r++) {
    const key = out.keys[r] ?? "";
    const error = errors[r];
    if (error) {
      lines[r] = JSON.stringify({ key, error });
      continue;
    }
    for (let k = 0; k < width; k++) logits[k] = values[r * width + k] ?? 0;
    lines[r] = JSON.stringify(predictionRow(key, logits, out.model_version, out.batch, classify));
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
