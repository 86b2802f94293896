import { loadTokenizer, type Tokenizer, withSpecials } from "@ferry/model-repository";
import { InProcessSession } from "@ferry/runtime";
import { padBatch, poolRows } from "../apps/worker/src/embedder/pooling.js";
import { tempRepository } from "../test/helpers/model-repo.js";
import { Stack } from "../test/helpers/stack.js";
import { closedLoop, round } from "./load.js";
import { printTable } from "./table.js";

const MODEL = "bert-fortunes";
const DIR = `models/${MODEL}`;
/** Inputs per request, and rows per batch on both sides. */
const BATCH = 32;
const CLIENTS = 4;
const SECONDS = 10;
const TEXTS = 40_000;

/**
 * `n` different texts of 6 to 40 words drawn (seeded) from the model's own vocabulary: every
 * input new, so nothing is answered from a cache and every row is tokenized and computed.
 */
function distinctTexts(tokenizer: Tokenizer, n: number): string[] {
  const words: string[] = [];
  for (let id = 5; id < 8192; id++) {
    const piece = tokenizer.piece(id);
    if (/^[a-z]{2,}$/.test(piece)) words.push(piece);
  }
  // mulberry32: 32-bit integer steps (a float LCG loses bits past 2^53 and cycles early)
  let state = 12345;
  const next = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  const seen = new Set<string>();
  for (let tries = 0; seen.size < n; tries++) {
    if (tries > 4 * n) throw new Error(`only ${seen.size} different texts in ${tries} draws`);
    const length = 6 + (next() % 35);
    seen.add(Array.from({ length }, () => words[next() % words.length]).join(" "));
  }
  return [...seen];
}

/** Ferry: CLIENTS clients, each sending requests of BATCH inputs, for SECONDS. */
async function throughFerry(texts: string[]): Promise<Record<string, string | number>> {
  // the worker's batch made the raw side's: BATCH rows, dispatched as soon as there are BATCH
  const repo = tempRepository({
    [MODEL]: {
      max_batch_size: BATCH,
      dynamic_batching: { preferred_batch_sizes: [BATCH], max_queue_delay_ms: 2 },
    },
  });
  const stack = await new Stack({
    env: { MODEL_REPOSITORY: repo, WORKER_MODELS: MODEL },
  }).start();
  try {
    const bodies: string[] = [];
    for (let k = 0; k + BATCH <= texts.length; k += BATCH)
      bodies.push(JSON.stringify({ model: MODEL, input: texts.slice(k, k + BATCH) }));
    const r = await closedLoop({
      url: stack.url("/v1/embeddings"),
      bodies,
      concurrency: CLIENTS,
      durationMs: SECONDS * 1000,
    });
    return {
      path: `Ferry: HTTP /v1/embeddings, ${CLIENTS} clients x ${BATCH} inputs, API + 1 worker (1 instance thread)`,
      requests: r.requests,
      errors: r.errors,
      embeddings_per_s: round(r.rps * BATCH, 0),
      p50_ms: r.p50_ms,
      p99_ms: r.p99_ms,
    };
  } finally {
    await stack.stop();
  }
}

/**
 * ONNX Runtime in this process on the same inputs at the same batch: tokenize, pad, run,
 * mean-pool and normalize (the worker's own pooling code), one batch after another.
 */
async function raw(
  tokenizer: Tokenizer,
  texts: string[],
): Promise<Record<string, string | number>> {
  const session = await InProcessSession.load(`${DIR}/1/model.onnx`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  try {
    let done = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < SECONDS * 1000) {
      const batch = Array.from({ length: BATCH }, (_, k) => texts[(done + k) % texts.length] ?? "");
      const ids = batch.map((t) => withSpecials(tokenizer, t));
      const out = await session.run(padBatch(ids, true));
      const hidden = out.last_hidden_state;
      if (!hidden) throw new Error("no last_hidden_state");
      poolRows(
        hidden,
        ids.map((r) => r.length),
        "mean",
        true,
      );
      done += BATCH;
    }
    const seconds = (performance.now() - t0) / 1000;
    return {
      path: `raw ONNX Runtime in-process: tokenize, batch of ${BATCH}, run, pool, 1 thread`,
      requests: done / BATCH,
      errors: 0,
      embeddings_per_s: round(done / seconds, 0),
      p50_ms: "",
      p99_ms: "",
    };
  } finally {
    await session.release();
  }
}

export async function embeddingsBench(): Promise<Record<string, unknown>> {
  const tokenizer = await loadTokenizer(DIR, { type: "huggingface", file: "tokenizer.json" });
  const texts = distinctTexts(tokenizer, TEXTS);
  const tokens = texts.slice(0, 1000).reduce((n, t) => n + withSpecials(tokenizer, t).length, 0);
  console.log(
    `embeddings bench: ${MODEL}; ${TEXTS} different texts (6-40 words of its vocabulary, ${round(tokens / 1000, 1)} tokens each on average), batches of ${BATCH}, ${SECONDS} s each side: Ferry (HTTP, Redis, the worker's dynamic batcher) vs ONNX Runtime alone`,
  );
  const rows = [await raw(tokenizer, texts), await throughFerry(texts)];
  printTable("embeddings/s at batch 32", rows);
  const ratio = round(Number(rows[1]?.embeddings_per_s) / Number(rows[0]?.embeddings_per_s), 3);
  printTable("ratio", [{ ratio: "Ferry / raw embeddings/s", value: ratio }]);
  return {
    batch: BATCH,
    clients: CLIENTS,
    seconds: SECONDS,
    mean_tokens: tokens / 1000,
    rows,
    ratio,
  };
}
