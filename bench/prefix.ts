import { readFileSync } from "node:fs";
import { scrapeMetric } from "../test/helpers/metrics.js";
import { tempRepository } from "../test/helpers/model-repo.js";
import { Stack } from "../test/helpers/stack.js";
import { median, quantile, round } from "./load.js";
import { printTable } from "./table.js";

/** Requests per client per round, and rounds (each runs both stacks, in alternating order). */
const PER_ROUND = 40;
const ROUNDS = 5;
const CLIENTS = [1, 4];

/**
 * A system prompt of the kind chats carry on every turn (156 bytes: as many of tiny-lm's tokens): the
 * part of each prompt a prefix cache can hold; the question after it differs every request.
 */
const SYSTEM =
  "You are the fortune teller of a small seaside town. Answer every question in one short line, " +
  "kindly, and never promise riches. Mention the sea when you can.";

let asked = 0;
/** A chat no earlier request sent: the shared system prompt, then a question of its own. */
function nextChat(): Record<string, unknown> {
  const k = asked++;
  return {
    model: "tiny-lm",
    messages: [
      { role: "system", content: SYSTEM },
      { role: "user", content: `Will day ${k} bring ${["rain", "luck", "fish"][k % 3]}?` },
    ],
    // the answer's first token: what a chat's time to first token is made of
    max_tokens: 1,
    temperature: 0,
  };
}

/** tiny-lm with the shipped scheduler but for `scheduler`. */
async function startStack(scheduler: Record<string, unknown>): Promise<Stack> {
  const base = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    scheduler: Record<string, unknown>;
  };
  const repo = tempRepository({ "tiny-lm": { scheduler: { ...base.scheduler, ...scheduler } } });
  return new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } }).start();
}

/** `clients` closed-loop clients, each sending PER_ROUND chats one after another; latencies in ms. */
async function round1(stack: Stack, clients: number): Promise<number[]> {
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < PER_ROUND; i++) {
        const t0 = performance.now();
        const res = await stack.post("/v1/chat/completions", nextChat());
        if (res.status !== 200) throw new Error(`chat answered ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return latencies;
}

export async function prefixBench(): Promise<Record<string, unknown>> {
  console.log(
    `prefix caching bench: tiny-lm chats that share a ${Buffer.byteLength(SYSTEM)}-byte system prompt, each with a question no other request asked, max_tokens 1 (the answer is its first token: the latency is the time to first token, mostly the prompt's prefill), temperature 0; two stacks up side by side, enable_prefix_caching on and off, ${ROUNDS} rounds of ${PER_ROUND} chats per client at ${CLIENTS.join(" and ")} clients, the stacks' order alternating per round; p50/p99 over every round's chats, ratio of the rounds' medians`,
  );
  const stacks = {
    on: await startStack({ enable_prefix_caching: true }),
    off: await startStack({ enable_prefix_caching: false }),
  };
  const samples: Record<string, number[]> = {};
  const ratios: Record<string, number[]> = {};
  try {
    // warm: the JIT has compiled both serving paths, and the cache has met the system prompt
    for (const stack of Object.values(stacks)) await round1(stack, 2);
    for (const clients of CLIENTS)
      for (let r = 0; r < ROUNDS; r++) {
        const order = r % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const);
        const medians: Record<string, number> = {};
        for (const side of order) {
          const latencies = await round1(stacks[side], clients);
          const key = `${side} c${clients}`;
          samples[key] = [...(samples[key] ?? []), ...latencies];
          medians[side] = median(latencies);
        }
        ratios[`c${clients}`] = [
          ...(ratios[`c${clients}`] ?? []),
          (medians.off ?? 0) / (medians.on || 1),
        ];
      }
    const hitRate = async (stack: Stack) => {
      const url = stack.workers[0]?.metricsUrl ?? "";
      const queries = await scrapeMetric(url, "ferry_worker_prefix_cache_queries_total");
      const hits = await scrapeMetric(url, "ferry_worker_prefix_cache_hits_total");
      return queries > 0 ? round(hits / queries, 3) : 0;
    };
    const rows = Object.entries(samples).map(([key, list]) => {
      const sorted = [...list].sort((a, b) => a - b);
      return {
        prefix_caching: key.split(" ")[0] ?? "",
        clients: Number(key.split(" c")[1]),
        chats: list.length,
        ttft_p50_ms: round(quantile(sorted, 0.5), 2),
        ttft_p99_ms: round(quantile(sorted, 0.99), 2),
      };
    });
    printTable("(a) a chat's time to first token (max_tokens 1, non-streamed)", rows);
    const hit = { on: await hitRate(stacks.on), off: await hitRate(stacks.off) };
    console.log(
      `(prompt tokens read from the prefix cache, over those looked up: on ${hit.on}, off ${hit.off})`,
    );
    const ratioRows = Object.entries(ratios).map(([c, list]) => ({
      ratio: `ttft p50 off / on at ${c.slice(1)} client(s), median of ${list.length} rounds`,
      value: round(median(list), 2),
      rounds: list.map((x) => round(x, 2)).join(" / "),
    }));
    printTable("ratios", ratioRows);
    const unshared = await nothingShared(stacks);
    return { rows, hit_rate: hit, ratios: ratioRows, nothing_shared: unshared };
  } finally {
    await Promise.all(Object.values(stacks).map((stack) => stack.stop()));
  }
}

/** Rounds of (b), and completions per stack per round. */
const COST_ROUNDS = 10;
const COST_PER_ROUND = 30;

/**
 * (b) What prefix caching costs where nothing is shared: one client, 48-token completions of
 * prompts no other request began with, the shipped settings (prompts kept) and finished
 * completions kept too against caching off, the three stacks in turn per round.
 */
async function nothingShared(stacks: { on: Stack; off: Stack }) {
  const kept = await startStack({ enable_prefix_caching: true, prefix_cache_completions: true });
  const sides = { ...stacks, "on + completions": kept };
  try {
    let k = 0;
    const measure = async (stack: Stack) => {
      const latencies: number[] = [];
      for (let i = 0; i < COST_PER_ROUND; i++) {
        const t0 = performance.now();
        const res = await stack.post("/v1/completions", {
          model: "tiny-lm",
          prompt: `Fortune ${k++}: you will`,
          max_tokens: 48,
          temperature: 0.8,
        });
        if (res.status !== 200) throw new Error(`completion answered ${res.status}`);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
      }
      return median(latencies);
    };
    for (const stack of Object.values(sides)) await measure(stack);
    const medians: Record<string, number[]> = {};
    const names = Object.keys(sides) as Array<keyof typeof sides>;
    for (let r = 0; r < COST_ROUNDS; r++)
      for (const name of r % 2 === 0 ? names : [...names].reverse())
        medians[name] = [...(medians[name] ?? []), await measure(sides[name])];
    const rows = names.map((name) => ({
      prefix_caching: name,
      latency_p50_ms_median_of_rounds: round(median(medians[name] ?? [])),
      over_off_median_of_rounds: round(
        median((medians[name] ?? []).map((m, r) => m / (medians.off?.[r] || 1))),
      ),
    }));
    printTable(
      `(b) nothing shared: one client, 48-token completions of unique prompts, ${COST_ROUNDS} rounds of ${COST_PER_ROUND} per stack, the stacks in turn`,
      rows,
    );
    return rows;
  } finally {
    await kept.stop();
  }
}
