import { readFileSync } from "node:fs";
import { loadTokenizer, type Tokenizer, withSpecials } from "@ferry/model-repository";
import { EMBED_ROW, encodeTensor } from "@ferry/protocol";
import { type BatchRunner, loadBatchRunner } from "@ferry/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { padBatch, poolRows } from "./pooling.js";
import { rowTokens } from "./row-tokens.js";

const DIR = "models/bert-fortunes";

/** PyTorch's pooled hidden states for a few texts, each run alone: written by its build. */
interface Reference {
  rows: Array<{ text: string; ids: number[]; pooled: Record<"cls" | "mean" | "last", number[]> }>;
}
const reference = JSON.parse(readFileSync(`${DIR}/reference.json`, "utf8")) as Reference;

let tokenizer: Tokenizer;
let runner: BatchRunner;
beforeAll(async () => {
  tokenizer = await loadTokenizer(DIR, { type: "huggingface", file: "tokenizer.json" });
  runner = await loadBatchRunner(`${DIR}/1/model.onnx`, {
    inline: true,
    instances: 1,
    intraOpThreads: 1,
    executionProvider: "cpu",
  });
});
afterAll(() => runner.close());

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  Math.max(...Array.from(a, (x, k) => Math.abs(x - (b[k] as number))));

describe("bert-fortunes through ONNX Runtime and the worker's pooling", () => {
  it("tokenizes each text as the build's Python tokenizer did", () => {
    for (const row of reference.rows) expect(withSpecials(tokenizer, row.text)).toEqual(row.ids);
  });

  it("pools as PyTorch does (CLS, mean, last), every row in one padded batch", async () => {
    const ids = reference.rows.map((r) => r.ids);
    const lengths = ids.map((r) => r.length);
    // rows of different lengths: padding must change no row's vector
    expect(new Set(lengths).size).toBeGreaterThan(1);
    const out = await runner.run(padBatch(ids, true));
    const hidden = out.last_hidden_state;
    if (!hidden) throw new Error("no last_hidden_state");
    for (const pooling of ["cls", "mean", "last"] as const) {
      const vectors = poolRows(hidden, lengths, pooling, false);
      reference.rows.forEach((row, r) => {
        expect(
          maxDiff(vectors[r] as Float32Array, row.pooled[pooling]),
          `${pooling} ${r}`,
        ).toBeLessThan(1e-4);
      });
    }
  });

  it("normalizes to unit length, in the same direction", async () => {
    const ids = reference.rows.map((r) => r.ids);
    const out = await runner.run(padBatch(ids, true));
    const lengths = ids.map((r) => r.length);
    const [unit] = poolRows(out.last_hidden_state as never, lengths, "mean", true);
    const raw = reference.rows[0]?.pooled.mean ?? [];
    const norm = Math.hypot(...raw);
    expect(Math.hypot(...(unit as Float32Array))).toBeCloseTo(1, 5);
    expect(
      maxDiff(
        unit as Float32Array,
        raw.map((x) => x / norm),
      ),
    ).toBeLessThan(1e-5);
  });
});

describe("an embedding row's tokens, as the worker counts them", () => {
  const text = (t: string, truncate?: number) => ({
    [EMBED_ROW.text]: Buffer.from(t).toString("base64"),
    ...(truncate === undefined ? {} : { [EMBED_ROW.truncate]: encodeTensor("INT64", [truncate]) }),
  });
  const ids = (t: number[]) => ({ [EMBED_ROW.ids]: encodeTensor("INT64", t) });

  it("a text gets its special tokens; truncation keeps them around its last tokens", () => {
    const full = rowTokens(text("one two three four five"), tokenizer, 128) as number[];
    const content = tokenizer.encode("one two three four five");
    expect(full).toEqual([2, ...content, 3]);
    expect(rowTokens(text("one two three four five", 4), tokenizer, 128)).toEqual([
      2,
      ...content.slice(-2),
      3,
    ]);
  });

  it("token ids are read as they are, the last ones kept when truncated", () => {
    expect(rowTokens(ids([5, 6, 7, 8]), tokenizer, 128)).toEqual([5, 6, 7, 8]);
    expect(rowTokens({ ...ids([5, 6, 7, 8]), ...text("", 2) }, tokenizer, 128)).toBe(
      "an embedding row carries either 'text' or 'input_ids'",
    );
    expect(
      rowTokens(
        { ...ids([5, 6, 7, 8]), [EMBED_ROW.truncate]: encodeTensor("INT64", [2]) },
        tokenizer,
        128,
      ),
    ).toEqual([7, 8]);
  });

  it("never trusts the API: too long, unknown ids and huge texts are refused here too", () => {
    expect(rowTokens(ids(Array(129).fill(5)), tokenizer, 128)).toMatch(
      /maximum context length is 128 tokens. However, you requested 129 tokens/,
    );
    expect(rowTokens(ids([5, 99_999]), tokenizer, 128)).toBe(
      "token id 99999 is not in the model's vocabulary",
    );
    expect(rowTokens(text("word ".repeat(200)), tokenizer, 128)).toMatch(
      /you requested 202 tokens/,
    );
    expect(rowTokens(text("a".repeat(128 * 64 + 1)), tokenizer, 128)).toMatch(
      /characters, far more/,
    );
    expect(rowTokens(text("word", 129), tokenizer, 128)).toMatch(/greater than max_model_len/);
  });
});
