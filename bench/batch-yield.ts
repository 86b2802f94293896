// `npm run bench -- batch-yield [--lines=N]`: an OpenAI batch of chat lines beside interactive
// streamed chats on tiny-lm: the interactive TTFT against idle, the batch's tokens/s against
// continuous batching alone.
import { readFileSync } from "node:fs";
import OpenAI, { toFile } from "openai";
import { tempRepository } from "../test/helpers/model-repo.js";
import { Stack } from "../test/helpers/stack.js";
import { median, quantile, round } from "./load.js";
import { postSse } from "./sse-client.js";
import { printTable } from "./table.js";

/** The batch band's share of the seats: `--share=X` (default: the model's, 0.5). */
const SHARE = ((v) => (v === undefined ? undefined : Number(v)))(
  process.argv.find((a) => a.startsWith("--share="))?.slice(8),
);
/** Batch lines (issue 41 asks for 2,000): `--lines=N` or BATCH_YIELD_LINES. */
const LINES = Number(
  process.argv.find((a) => a.startsWith("--lines="))?.slice(8) ??
    process.env.BATCH_YIELD_LINES ??
    2_000,
);
/** Each line's completion length, in turn (mean 40); every token counted (ignore_eos). */
const LENGTHS = [16, 64, 32, 48];
/** The direct arm's clients: the batch runner's own lines in flight (LINES_IN_FLIGHT). */
const DIRECT_CLIENTS = 64;
/** Interactive chats: their length, the pause between two (a user reading), idle samples. */
const INTERACTIVE_TOKENS = 16;
const INTERACTIVE_GAP_MS = 100;
const IDLE_SAMPLES = 30;
const WORDS = ["cat", "ship", "river", "lamp", "tower", "cloud", "stone", "garden", "clock"];

/** A prompt no other request of the run has (so no answer and no prefix is shared). */
const promptOf = (k: number, kind: string) =>
  `${kind} ${k}: tell me about the ${WORDS[k % WORDS.length]} and the ${WORDS[(k * 7 + 3) % WORDS.length]} #${(k * 7919) % 10_007}`;

const chatBody = (k: number) => ({
  model: "tiny-lm",
  messages: [{ role: "user", content: promptOf(k, "line") }],
  max_tokens: LENGTHS[k % LENGTHS.length],
  temperature: 0.8,
  ignore_eos: true,
});

let interactiveCount = 0;

/** One streamed interactive chat; its time to first token in ms. */
async function interactive(stack: Stack): Promise<number> {
  const t0 = performance.now();
  let ttft = 0;
  const status = await postSse(
    stack.url("/v1/chat/completions"),
    {
      model: "tiny-lm",
      messages: [{ role: "user", content: promptOf(interactiveCount++, "question") }],
      max_tokens: INTERACTIVE_TOKENS,
      temperature: 0.8,
      stream: true,
    },
    (e) => {
      if (ttft > 0 || e.data === "[DONE]") return;
      const chunk = JSON.parse(e.data) as { choices: Array<{ delta?: { content?: string } }> };
      if (chunk.choices[0]?.delta?.content) ttft = performance.now() - t0;
    },
  );
  if (status !== 200) throw new Error(`interactive chat answered HTTP ${status}`);
  return ttft;
}

/** Interactive chats one after another until `done()`, or `count` of them. */
async function interactiveWhile(stack: Stack, done: () => boolean, count = Infinity) {
  const ttfts: number[] = [];
  while (!done() && ttfts.length < count) {
    const ttft = await interactive(stack);
    if (ttft > 0) ttfts.push(ttft);
    await new Promise((r) => setTimeout(r, INTERACTIVE_GAP_MS));
  }
  return ttfts.sort((a, b) => a - b);
}

/** Continuous batching alone: the same lines as direct chat calls, DIRECT_CLIENTS at once. */
async function direct(stack: Stack): Promise<{ tokens: number; seconds: number }> {
  let next = 0;
  let tokens = 0;
  const started = performance.now();
  const client = async () => {
    while (next < LINES) {
      const res = await fetch(stack.url("/v1/chat/completions"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(chatBody(next++)),
      });
      if (res.status !== 200) throw new Error(`direct chat answered HTTP ${res.status}`);
      tokens += ((await res.json()) as { usage: { completion_tokens: number } }).usage
        .completion_tokens;
    }
  };
  await Promise.all(Array.from({ length: DIRECT_CLIENTS }, client));
  return { tokens, seconds: (performance.now() - started) / 1000 };
}

/** The lines as an OpenAI batch, interactive chats beside it until it completes. */
async function batchWithInteractive(stack: Stack) {
  const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
  const lines = Array.from({ length: LINES }, (_, k) =>
    JSON.stringify({
      custom_id: `line-${k}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: chatBody(k),
    }),
  );
  const file = await openai.files.create({
    file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "lines.jsonl"),
    purpose: "batch",
  });
  const started = performance.now();
  let batch = await openai.batches.create({
    input_file_id: file.id,
    endpoint: "/v1/chat/completions",
    completion_window: "24h",
  });
  let finished = 0;
  const polling = (async () => {
    while (batch.status !== "completed" && batch.status !== "failed") {
      await new Promise((r) => setTimeout(r, 200));
      batch = await openai.batches.retrieve(batch.id);
    }
    finished = performance.now();
  })();
  const ttfts = await interactiveWhile(stack, () => finished > 0);
  await polling;
  if (batch.status !== "completed" || batch.request_counts?.completed !== LINES)
    throw new Error(`batch ended ${batch.status}: ${JSON.stringify(batch.request_counts)}`);
  const output = await (await openai.files.content(batch.output_file_id ?? "")).text();
  let tokens = 0;
  for (const line of output.split("\n"))
    if (line)
      tokens += (
        JSON.parse(line) as { response: { body: { usage: { completion_tokens: number } } } }
      ).response.body.usage.completion_tokens;
  return { tokens, seconds: (finished - started) / 1000, ttfts };
}

/** Preemptions the worker counted so far (its Prometheus counter). */
async function preemptions(stack: Stack): Promise<number> {
  const url = stack.workers[0]?.metricsUrl;
  if (url === undefined) return Number.NaN;
  const text = await (await fetch(url)).text();
  const match = /^ferry_worker_preempted_sequences_total\{[^}]*\} (\d+)/m.exec(text);
  return Number(match?.[1] ?? 0);
}

export async function batchYieldBench(): Promise<Record<string, unknown>> {
  const base = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    scheduler: Record<string, unknown>;
  };
  console.log(
    `batch-yield bench: tiny-lm (max_num_seqs ${base.scheduler.max_num_seqs}, batch_seat_share ${SHARE ?? "0.5 (the default)"}), one stack. ` +
      `(a) interactive streamed chats (${INTERACTIVE_TOKENS} tokens, one at a time, ${INTERACTIVE_GAP_MS} ms apart) on an idle server, ` +
      `${IDLE_SAMPLES} before and ${IDLE_SAMPLES} after the rest; (c) continuous batching alone: the ${LINES} chat lines ` +
      `(${LENGTHS.join("/")} tokens in turn, ignore_eos, every prompt different) as direct /v1/chat/completions calls from ` +
      `${DIRECT_CLIENTS} clients (the batch runner's lines in flight), so the engine runs the same work without the batch ` +
      `runner or any interactive traffic; (b) the same lines as an OpenAI batch (/v1/files + /v1/batches, openai client), ` +
      "interactive chats as in (a) until it completes. TTFT is the client's (request sent to first content chunk); " +
      "tokens/s is completion tokens over wall time (batch: create to completed, polled every 200 ms)",
  );
  const repo = tempRepository({
    "tiny-lm": {
      scheduler: { ...base.scheduler, ...(SHARE === undefined ? {} : { batch_seat_share: SHARE }) },
    },
  });
  const stack = await new Stack({
    env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" },
  }).start();
  try {
    // warm-up: the first requests pay for JIT and ONNX Runtime's first runs
    await interactiveWhile(stack, () => false, 5);
    const idleBefore = await interactiveWhile(stack, () => false, IDLE_SAMPLES);
    const alone = await direct(stack);
    console.log(`  continuous batching alone: ${alone.tokens} tokens in ${round(alone.seconds)} s`);
    const preemptedBefore = await preemptions(stack);
    const batch = await batchWithInteractive(stack);
    const preempted = (await preemptions(stack)) - preemptedBefore;
    console.log(`  batch: ${batch.tokens} tokens in ${round(batch.seconds)} s`);
    const idleAfter = await interactiveWhile(stack, () => false, IDLE_SAMPLES);
    const idle = [...idleBefore, ...idleAfter].sort((a, b) => a - b);
    const ttftRow = (arm: string, ttfts: number[]) => ({
      arm,
      requests: ttfts.length,
      ttft_p50_ms: round(quantile(ttfts, 0.5)),
      ttft_p99_ms: round(quantile(ttfts, 0.99)),
    });
    const rows = [
      ttftRow("(a) interactive, idle", idle),
      ttftRow("(b) interactive, during the batch", batch.ttfts),
    ];
    printTable("interactive streamed chat TTFT", rows);
    const aloneRate = alone.tokens / alone.seconds;
    const batchRate = batch.tokens / batch.seconds;
    const ratios = {
      "TTFT p50 during batch / idle (target <= 1.5)": round(
        quantile(batch.ttfts, 0.5) / quantile(idle, 0.5),
      ),
      "TTFT p50 idle before / after (drift)": round(
        median(idleBefore) / Math.max(1e-9, median(idleAfter)),
      ),
      "batch tokens/s / continuous batching alone (target >= 0.8)": round(batchRate / aloneRate),
    };
    printTable("throughput", [
      { arm: "(c) continuous batching alone", tokens_per_s: round(aloneRate, 1) },
      { arm: "(b) the OpenAI batch, interactive beside it", tokens_per_s: round(batchRate, 1) },
    ]);
    printTable(
      "ratios",
      Object.entries(ratios).map(([ratio, value]) => ({ ratio, value })),
    );
    console.log(`  batch lines preempted for interactive chats: ${preempted}`);
    return {
      lines: LINES,
      ttft: rows,
      tokens_per_s: { alone: round(aloneRate, 1), batch: round(batchRate, 1) },
      ratios,
      preempted,
    };
  } finally {
    await stack.stop();
  }
}
