import { readFileSync } from "node:fs";
import { LmRuntime } from "@ferry/runtime";
import { tempRepository } from "../test/helpers/model-repo.js";
import { REDIS_URL, Stack } from "../test/helpers/stack.js";
import { cpuMeter, redisPid } from "./cpu.js";
import { quantile, round } from "./load.js";
import { postSse } from "./sse-client.js";
import { printTable } from "./table.js";

const MAX_TOKENS = 48;
const DURATION_MS = 8_000;
const CONCURRENCY = [1, 4, 16];
const prompts = [
  "The meaning of life is",
  "Once upon a time",
  "Never trust a",
  "You will",
  "A man walks into a bar",
  "Love is",
];

interface StreamStats {
  streams: number;
  tokens_per_s: number;
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  itl_p50_ms: number;
  itl_p99_ms: number;
  /** CPU microseconds per streamed token: API / worker / Redis / this load generator. */
  cpu_us_per_token: string;
}

/** `concurrency` clients, each streaming one completion after another for DURATION_MS. */
async function streamLoad(stack: Stack, concurrency: number): Promise<StreamStats> {
  const url = stack.url("/v1/completions");
  const meter = cpuMeter({
    api: stack.api.child.pid,
    worker: stack.workers[0]?.child.pid,
    redis: redisPid(REDIS_URL),
    client: process.pid,
  });
  const ttft: number[] = [];
  const itl: number[] = [];
  let tokens = 0;
  const started = performance.now();
  const client = async (k: number) => {
    let n = k;
    while (performance.now() - started < DURATION_MS) {
      const t0 = performance.now();
      let last = 0;
      const status = await postSse(
        url,
        {
          model: "tiny-lm",
          prompt: prompts[n++ % prompts.length],
          max_tokens: MAX_TOKENS,
          temperature: 0.8,
          ignore_eos: true,
          stream: true,
        },
        (e) => {
          if (e.data === "[DONE]") return;
          const chunk = JSON.parse(e.data) as { choices: Array<{ text: string }> };
          if (!chunk.choices[0]?.text) return;
          const now = performance.now();
          if (last === 0) ttft.push(now - t0);
          else itl.push(now - last);
          last = now;
          tokens++;
        },
      );
      if (status !== 200) throw new Error(`completion stream answered HTTP ${status}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, k) => client(k)));
  const seconds = (performance.now() - started) / 1000;
  ttft.sort((a, b) => a - b);
  itl.sort((a, b) => a - b);
  return {
    streams: concurrency,
    tokens_per_s: round(tokens / seconds, 1),
    ttft_p50_ms: round(quantile(ttft, 0.5)),
    ttft_p99_ms: round(quantile(ttft, 0.99)),
    itl_p50_ms: round(quantile(itl, 0.5)),
    itl_p99_ms: round(quantile(itl, 0.99)),
    cpu_us_per_token: meter.perUnit(tokens),
  };
}

/** The limit: the batched decode loop on the runtime itself, no queue, HTTP or sampling. */
async function rawDecode(batch: number): Promise<number> {
  const config = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    architecture: { n_layer: number; n_head: number; head_dim: number; vocab_size: number };
  };
  const a = config.architecture;
  const lm = await LmRuntime.load(
    "models/tiny-lm/1/model.onnx",
    { layers: a.n_layer, heads: a.n_head, headDim: a.head_dim, vocab: a.vocab_size },
    { executionProvider: "cpu", intraOpThreads: 1 },
  );
  let tokens = 0;
  let seq = 0;
  const started = performance.now();
  while (performance.now() - started < DURATION_MS / 2) {
    const seqs = Array.from({ length: batch }, () => ++seq);
    const prompt = Array.from(Buffer.from(prompts[seq % prompts.length] ?? ""));
    await lm.step(seqs.map((s) => ({ seq: s, tokens: prompt })));
    for (let t = 0; t < MAX_TOKENS; t++) {
      await lm.step(seqs.map((s) => ({ seq: s, tokens: [101] })));
      tokens += batch;
    }
    lm.release(seqs);
  }
  const rate = tokens / ((performance.now() - started) / 1000);
  await lm.close();
  return round(rate, 1);
}

async function ferryMode(
  name: string,
  scheduler: Record<string, unknown>,
): Promise<Record<string, StreamStats>> {
  const base = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    scheduler: Record<string, unknown>;
  };
  const repo = tempRepository({ "tiny-lm": { scheduler: { ...base.scheduler, ...scheduler } } });
  const stack = await new Stack({
    env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" },
  }).start();
  try {
    const out: Record<string, StreamStats> = {};
    for (const c of CONCURRENCY) out[`c${c}`] = await streamLoad(stack, c);
    console.log(`  measured ${name}`);
    return out;
  } finally {
    await stack.stop();
  }
}

export async function generationBench(): Promise<Record<string, unknown>> {
  console.log(
    `generation bench: tiny-lm, streaming completions of ${MAX_TOKENS} tokens at temperature 0.8 over HTTP SSE, ` +
      `closed-loop clients at ${CONCURRENCY.join(", ")} streams, ${DURATION_MS / 1000} s each; ` +
      "cpu_us_per_token: CPU of the API / worker / Redis / load generator per token (all share this machine's cores)",
  );
  const modes = {
    sequential: await ferryMode("sequential (max_num_seqs 1)", { max_num_seqs: 1 }),
    static: await ferryMode("static batching", { policy: "static", static_wait_ms: 50 }),
    continuous: await ferryMode("continuous batching", {}),
    continuous_mixed_prefill: await ferryMode("continuous, prefill in the decode pass", {
      mixed_prefill: true,
    }),
  };
  const raw: Record<string, number> = {};
  for (const c of CONCURRENCY) raw[`c${c}`] = await rawDecode(c);
  const rows: Array<Record<string, string | number>> = [];
  for (const [mode, byC] of Object.entries(modes)) {
    for (const stats of Object.values(byC)) rows.push({ mode, ...stats });
  }
  for (const [c, rate] of Object.entries(raw))
    rows.push({
      mode: "raw batched decode (limit)",
      streams: Number(c.slice(1)),
      tokens_per_s: rate,
    });
  printTable("tokens/s, time to first token and inter-token latency", rows);
  const at16 = (m: Record<string, StreamStats>) => m.c16?.tokens_per_s ?? 0;
  const ratios = {
    "continuous / sequential tokens/s at 16": round(
      at16(modes.continuous) / at16(modes.sequential),
      2,
    ),
    "continuous / static tokens/s at 16": round(at16(modes.continuous) / at16(modes.static), 2),
    "continuous / raw decode limit at 16": round(at16(modes.continuous) / (raw.c16 ?? 1), 2),
    "continuous TTFT p50 at 16 / at 1": round(
      (modes.continuous.c16?.ttft_p50_ms ?? 0) / (modes.continuous.c1?.ttft_p50_ms ?? 1),
      2,
    ),
    "mixed-prefill / separate-prefill tokens/s at 16": round(
      at16(modes.continuous_mixed_prefill) / at16(modes.continuous),
      2,
    ),
  };
  printTable(
    "ratios",
    Object.entries(ratios).map(([ratio, value]) => ({ ratio, value })),
  );
  return { modes, raw_decode_tokens_per_s: raw, ratios };
}
