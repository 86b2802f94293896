import { readFileSync } from "node:fs";
import { InProcessSession } from "@ferry/runtime";

interface Samples {
  digits: { inputs: number[][]; labels: number[] };
  mnist: { inputs: number[][]; labels: number[] };
}

/** Held-out rows written by models/build/build_classifiers.py, with their true labels. */
export const samples = JSON.parse(readFileSync("models/samples.json", "utf8")) as Samples;

/**
 * An NDJSON batch body of `rows` items (`{"key":"r<k>","features":[...]}`), every row a
 * held-out sample with its first feature nudged, so that no two rows are the same input.
 */
export function ndjsonRows(model: "digits" | "mnist", rows: number): string {
  return Array.from({ length: rows }, (_, k) => {
    const features = [...(samples[model].inputs[k % 10] as number[])];
    features[0] = k / rows;
    return `${JSON.stringify({ key: `r${k}`, features })}\n`;
  }).join("");
}

/** Logits from ONNX Runtime in this process, without Ferry: the reference answers. */
export async function referenceLogits(
  model: string,
  version: string,
  rows: number[][],
): Promise<number[][]> {
  const session = await InProcessSession.load(`models/${model}/${version}/model.onnx`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  const width = rows[0]?.length ?? 0;
  const out = await session.run({
    input: { data: Float32Array.from(rows.flat()), dims: [rows.length, width] },
  });
  await session.release();
  const logits = Array.from(out.logits?.data as Float32Array);
  return rows.map((_, r) => logits.slice(r * 10, (r + 1) * 10));
}

export function argmax(xs: number[]): number {
  return xs.reduce((best, x, k) => (x > (xs[best] ?? -Infinity) ? k : best), 0);
}
