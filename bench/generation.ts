import { readFileSync } from "node:fs";
import { LmRuntime } from "@ferry/runtime";
import { tempRepository } from "../test/helpers/model-repo.js";
import { REDIS_TARGET, Stack } from "../test/helpers/stack.js";
import { cpuMeter, redisPid } from "./cpu.js";
import { median, quantile, round } from "./load.js";
import { postSse } from "./sse-client.js";
import { printTable } from "./table.js";

/** The raw loop's completion length: the mean of LENGTHS. */
const MAX_TOKENS = 48;
/**
 * Completion lengths, taken in turn by each client (mean 48): real traffic mixes short and long
 * answers, which is what separates continuous from static batching.
 */
const LENGTHS = [16, 80, 32, 64, 24, 72];
const DURATION_MS = 6_000;
/** Rounds over every cell; medians are reported (GEN_ROUNDS). */
const ROUNDS = Number(process.env.GEN_ROUNDS ?? 3);
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
async function streamLoad(
  stack: Stack,
  concurrency: number,
  chat = false,
  extra: Record<string, unknown> = {},
): Promise<StreamStats> {
  const url = stack.url(chat ? "/v1/chat/completions" : "/v1/completions");
  const meter = cpuMeter({
    api: stack.api.child.pid,
    worker: stack.workers[0]?.child.pid,
    redis: redisPid(REDIS_TARGET),
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
          ...(chat
            ? { messages: [{ role: "user", content: prompts[n++ % prompts.length] }] }
            : { prompt: prompts[n++ % prompts.length] }),
          max_tokens: LENGTHS[n % LENGTHS.length],
          temperature: 0.8,
          ignore_eos: true,
          stream: true,
          ...extra,
        },
        (e) => {
          if (e.data === "[DONE]") return;
          const chunk = JSON.parse(e.data) as {
            choices: Array<{ text?: string; delta?: { content?: string } }>;
          };
          const choice = chunk.choices[0];
          if (!(choice?.text || choice?.delta?.content)) return;
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
    { layers: a.n_layer, kvHeads: a.n_head, headDim: a.head_dim, vocab: a.vocab_size },
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

/** Scheduler settings of each way of serving that the bench compares. */
const MODES: Record<
  string,
  {
    label: string;
    scheduler: Record<string, unknown>;
    chat?: boolean;
    /** Request fields beyond the plain streamed completion's. */
    body?: Record<string, unknown>;
  }
> = {
  sequential: { label: "sequential (max_num_seqs 1)", scheduler: { max_num_seqs: 1 } },
  static: { label: "static batching", scheduler: { policy: "static", static_wait_ms: 50 } },
  continuous: { label: "continuous batching (prompts on a prefill thread)", scheduler: {} },
  continuous_prefill_pass: {
    label: "continuous, prompts in a pass of their own on the decode thread",
    scheduler: { prefill_thread: false },
  },
  continuous_mixed_prefill: {
    label: "continuous, prompts in the decode pass",
    scheduler: { mixed_prefill: true },
  },
  continuous_no_prefix_cache: {
    label: "continuous, prefix caching off (what keeping prompts and answers costs or saves)",
    scheduler: { enable_prefix_caching: false },
  },
  continuous_chat: {
    label:
      "continuous, the same prompts as chat messages (/v1/chat/completions, template rendered)",
    scheduler: {},
    chat: true,
  },
  continuous_logprobs: {
    label:
      "continuous, each token's logprobs with 5 alternatives, frequency and presence penalties and a logit_bias",
    scheduler: {},
    body: {
      logprobs: 5,
      frequency_penalty: 0.5,
      presence_penalty: 0.3,
      logit_bias: { "101": -2, "116": 1 },
    },
  },
};

async function startMode(scheduler: Record<string, unknown>): Promise<Stack> {
  const base = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    scheduler: Record<string, unknown>;
  };
  const repo = tempRepository({ "tiny-lm": { scheduler: { ...base.scheduler, ...scheduler } } });
  return new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } }).start();
}

/** Field by field medians of one cell's rounds; the CPU split of its median-throughput round. */
function medianStats(runs: StreamStats[]): StreamStats & { tokens_per_s_rounds: string } {
  const byRate = [...runs].sort((a, b) => a.tokens_per_s - b.tokens_per_s);
  const mid = byRate[Math.floor((byRate.length - 1) / 2)] ?? runs[0];
  const m = (k: keyof Omit<StreamStats, "cpu_us_per_token">) => median(runs.map((r) => r[k]));
  return {
    streams: m("streams"),
    tokens_per_s: m("tokens_per_s"),
    tokens_per_s_rounds: runs.map((r) => Math.round(r.tokens_per_s)).join("/"),
    ttft_p50_ms: m("ttft_p50_ms"),
    ttft_p99_ms: m("ttft_p99_ms"),
    itl_p50_ms: m("itl_p50_ms"),
    itl_p99_ms: m("itl_p99_ms"),
    cpu_us_per_token: mid?.cpu_us_per_token ?? "",
  };
}

export async function generationBench(): Promise<Record<string, unknown>> {
  console.log(
    `generation bench: tiny-lm, streaming completions of ${LENGTHS.join("/")} tokens in turn (mean ${MAX_TOKENS}) at temperature 0.8 over HTTP SSE, ` +
      `closed-loop clients at ${CONCURRENCY.join(", ")} streams, ${DURATION_MS / 1000} s a cell; ` +
      `${ROUNDS} rounds, each running every mode in turn (one stack up at a time), medians shown ` +
      "(tokens_per_s_rounds: each round's figure); cpu_us_per_token: CPU of the API / worker / " +
      "Redis / load generator per token (all share this machine's cores)",
  );
  const names = Object.keys(MODES);
  const runs: Record<string, Record<string, StreamStats[]>> = {};
  const rawRuns: Record<string, number[]> = {};
  for (const name of names) runs[name] = Object.fromEntries(CONCURRENCY.map((c) => [`c${c}`, []]));
  for (let r = 1; r <= ROUNDS; r++) {
    // one stack at a time: an idle stack's timers (stall checks, heartbeats) would be noise
    for (const name of names) {
      const stack = await startMode(MODES[name]?.scheduler ?? {});
      try {
        for (const c of CONCURRENCY)
          runs[name]?.[`c${c}`]?.push(
            await streamLoad(stack, c, MODES[name]?.chat === true, MODES[name]?.body),
          );
      } finally {
        await stack.stop();
      }
    }
    for (const c of CONCURRENCY) {
      const limit = await rawDecode(c);
      rawRuns[`c${c}`] = [...(rawRuns[`c${c}`] ?? []), limit];
    }
    console.log(`  round ${r}/${ROUNDS} measured`);
  }
  const modes: Record<string, Record<string, ReturnType<typeof medianStats>>> = {};
  for (const name of names)
    modes[name] = Object.fromEntries(
      Object.entries(runs[name] ?? {}).map(([c, list]) => [c, medianStats(list)]),
    );
  const raw = Object.fromEntries(
    Object.entries(rawRuns).map(([c, list]) => [c, round(median(list), 1)]),
  );
  const rows: Array<Record<string, string | number>> = [];
  for (const [mode, byC] of Object.entries(modes)) {
    for (const stats of Object.values(byC)) rows.push({ mode, ...stats });
  }
  for (const [c, list] of Object.entries(rawRuns))
    rows.push({
      mode: "raw batched decode (limit)",
      streams: Number(c.slice(1)),
      tokens_per_s: raw[c] ?? 0,
      tokens_per_s_rounds: list.map(Math.round).join("/"),
    });
  printTable("tokens/s, time to first token and inter-token latency (medians of the rounds)", rows);
  // each ratio within a round (its cells ran a minute or two apart at most), then their median
  const perRound = (f: (r: number) => number) =>
    Array.from({ length: ROUNDS }, (_, r) => f(r)).filter(Number.isFinite);
  const cell = (mode: string, c: number, r: number) => runs[mode]?.[`c${c}`]?.[r];
  const rate = (mode: string, r: number) => cell(mode, 16, r)?.tokens_per_s ?? Number.NaN;
  const ratioRows = Object.entries({
    "continuous / sequential tokens/s at 16": perRound(
      (r) => rate("continuous", r) / rate("sequential", r),
    ),
    "continuous / static tokens/s at 16": perRound(
      (r) => rate("continuous", r) / rate("static", r),
    ),
    "continuous / raw decode limit at 16": perRound(
      (r) => rate("continuous", r) / (rawRuns.c16?.[r] ?? Number.NaN),
    ),
    "continuous TTFT p50 at 16 / at 1": perRound(
      (r) =>
        (cell("continuous", 16, r)?.ttft_p50_ms ?? Number.NaN) /
        (cell("continuous", 1, r)?.ttft_p50_ms ?? Number.NaN),
    ),
    "prefill thread / prefill pass TTFT p50 at 16": perRound(
      (r) =>
        (cell("continuous", 16, r)?.ttft_p50_ms ?? Number.NaN) /
        (cell("continuous_prefill_pass", 16, r)?.ttft_p50_ms ?? Number.NaN),
    ),
    "prefill thread / prefill pass tokens/s at 16": perRound(
      (r) => rate("continuous", r) / rate("continuous_prefill_pass", r),
    ),
    "mixed-prefill / prefill pass tokens/s at 16": perRound(
      (r) => rate("continuous_mixed_prefill", r) / rate("continuous_prefill_pass", r),
    ),
    // the prefix cache's keeping (every prompt and finished answer) against its hits
    "prefix caching on / off tokens/s at 16": perRound(
      (r) => rate("continuous", r) / rate("continuous_no_prefix_cache", r),
    ),
    "prefix caching on / off TTFT p50 at 16": perRound(
      (r) =>
        (cell("continuous", 16, r)?.ttft_p50_ms ?? Number.NaN) /
        (cell("continuous_no_prefix_cache", 16, r)?.ttft_p50_ms ?? Number.NaN),
    ),
    // what rendering the chat template costs a first token
    "chat / completion TTFT p50 at 1": perRound(
      (r) =>
        (cell("continuous_chat", 1, r)?.ttft_p50_ms ?? Number.NaN) /
        (cell("continuous", 1, r)?.ttft_p50_ms ?? Number.NaN),
    ),
    "chat / completion TTFT p50 at 16": perRound(
      (r) =>
        (cell("continuous_chat", 16, r)?.ttft_p50_ms ?? Number.NaN) /
        (cell("continuous", 16, r)?.ttft_p50_ms ?? Number.NaN),
    ),
    // what log probabilities and logit changes cost the decode loop and the stream
    "logprobs + penalties / plain tokens/s at 16": perRound(
      (r) => rate("continuous_logprobs", r) / rate("continuous", r),
    ),
    "logprobs + penalties / plain inter-token p50 at 16": perRound(
      (r) =>
        (cell("continuous_logprobs", 16, r)?.itl_p50_ms ?? Number.NaN) /
        (cell("continuous", 16, r)?.itl_p50_ms ?? Number.NaN),
    ),
  }).map(([ratio, values]) => ({
    ratio,
    median: round(median(values), 2),
    rounds: values.map((v) => round(v, 2)).join(" / "),
  }));
  printTable("ratios", ratioRows);
  return {
    modes,
    raw_decode_tokens_per_s: raw,
    ratios: Object.fromEntries(ratioRows.map((r) => [r.ratio, r.median])),
    rounds: { runs, raw: rawRuns },
  };
}
