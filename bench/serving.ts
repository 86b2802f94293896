import { tempRepository } from "../test/helpers/model-repo.js";
import { samples } from "../test/helpers/samples.js";
import { Stack } from "../test/helpers/stack.js";
import { closedLoop, round } from "./load.js";
import { OFFLINE_CASES, offlineBatches, predictsBesideIngest } from "./offline-batches.js";
import { printTable } from "./table.js";

const REPEAT = 0.3;
/** Rounds of the offline batches: `--rounds=N`. */
const ROUNDS = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 3) || 3;

/**
 * Request bodies where a share `REPEAT` repeats an earlier input and the rest are new (a
 * pixel of a sample changed by the request's number), as a search service sees them.
 */
function bodies(n: number): string[] {
  const seen: number[][] = [];
  return Array.from({ length: n }, (_, k) => {
    const base = samples.digits.inputs[k % samples.digits.inputs.length] ?? [];
    const repeat = seen.length > 0 && (k * 7919) % 100 < REPEAT * 100;
    const features = repeat
      ? (seen[(k * 31) % seen.length] ?? base)
      : base.map((v, i) => (i === k % 64 ? v + 1 + (k % 997) : v));
    if (!repeat) seen.push(features);
    return JSON.stringify({ features });
  });
}

async function cacheOnOff(): Promise<Array<Record<string, string | number>>> {
  const rows: Array<Record<string, string | number>> = [];
  for (const enabled of [false, true]) {
    const repo = tempRepository({
      digits: { cache: { enabled, ttl_s: 3600, max_entries: 1_000_000 } },
    });
    const stack = await new Stack({
      env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
    }).start();
    try {
      const url = stack.url("/v1/models/digits/predict");
      // every configuration sees the same request sequence, so the hit rate is the workload's
      const r = await closedLoop({
        url,
        bodies: bodies(20_000),
        concurrency: 32,
        durationMs: 8_000,
      });
      rows.push({
        cache: enabled ? "on" : "off",
        repeat_rate: REPEAT,
        rps: r.rps,
        p50_ms: r.p50_ms,
        p99_ms: r.p99_ms,
        errors: r.errors,
      });
    } finally {
      await stack.stop();
    }
  }
  return rows;
}

export async function servingBench(): Promise<Record<string, unknown>> {
  const cases = OFFLINE_CASES.map((c) => `${c.rows.toLocaleString("en")} ${c.model} rows`).join(
    " and ",
  );
  console.log(
    `serving bench: digits v2; cache off vs on at a ${REPEAT * 100}% repeat rate (32 clients, 8 s). Offline batches of ${cases}, every row a different input, each arm once untimed, then ${ROUNDS} rounds rotating which arm goes first, each arm against its round's in-process pipeline: (1) in-process: one Node process reads the JSONL a MiB at a time, JSON.parses each line, runs ONNX Runtime at batch 32 (1 thread) and writes each answer (softmax) to a file; (2) ferry ndjson: the same rows as Ferry's own NDJSON batch (POST /v1/batches?model=), timed from the POST to its results read back to a file; (3) openai batch: the same JSONL through /v1/files, /v1/batches (endpoint /v1/models/{model}/predict), timed from the upload to the output file read back to a file; the clients are node:http, polling for the end every 10 ms`,
  );
  const cache = await cacheOnOff();
  printTable("prediction cache", cache);
  const offline = await offlineBatches(ROUNDS);
  printTable("offline batches (rows/s; phases in s)", offline.rows);
  printTable("offline batches against the in-process pipeline (target >= 0.6)", offline.ratios);
  const beside = await predictsBesideIngest(ROUNDS);
  printTable(
    "interactive digits predicts (2 sequential clients, a new input each) alone, then beside the mnist NDJSON post on the same API; api/queue: their Server-Timing's total and queue",
    beside,
  );
  const on = cache.find((r) => r.cache === "on");
  const off = cache.find((r) => r.cache === "off");
  const ratios = { "cache on / off rps": round(Number(on?.rps) / Number(off?.rps), 2) };
  printTable(
    "ratios",
    Object.entries(ratios).map(([ratio, value]) => ({ ratio, value })),
  );
  return { cache, offline, beside, ratios };
}
