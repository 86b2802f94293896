import { InProcessSession } from "@ferry/runtime";
import { tempRepository } from "../test/helpers/model-repo.js";
import { samples } from "../test/helpers/samples.js";
import { Stack } from "../test/helpers/stack.js";
import { closedLoop, round } from "./load.js";
import { printTable } from "./table.js";

const REPEAT = 0.3;
const BATCH_ITEMS = 50_000;

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

async function batchThroughput(): Promise<Record<string, number>> {
  const stack = await new Stack({ env: { WORKER_MODELS: "digits" } }).start();
  try {
    const lines = Array.from({ length: BATCH_ITEMS }, (_, k) =>
      JSON.stringify({ key: `k${k}`, features: samples.digits.inputs[k % 64] }),
    );
    const started = performance.now();
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      body: `${lines.join("\n")}\n`,
    });
    const { id } = (await res.json()) as { id: string };
    await stack.batchCompleted(id, 300_000);
    const seconds = (performance.now() - started) / 1000;
    const session = await InProcessSession.load("models/digits/2/model.onnx", {
      executionProvider: "cpu",
      intraOpThreads: 1,
    });
    const data = Float32Array.from(
      { length: 32 * 64 },
      (_, k) => samples.digits.inputs[0]?.[k % 64] ?? 0,
    );
    let raw = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 2_000) {
      await session.run({ input: { data: data.slice(), dims: [32, 64] } });
      raw += 32;
    }
    await session.release();
    const rawRate = raw / ((performance.now() - t0) / 1000);
    return {
      items: BATCH_ITEMS,
      ferry_rows_per_s: round(BATCH_ITEMS / seconds, 0),
      raw_batch32_rows_per_s: round(rawRate, 0),
      ratio: round(BATCH_ITEMS / seconds / rawRate, 3),
    };
  } finally {
    await stack.stop();
  }
}

export async function servingBench(): Promise<Record<string, unknown>> {
  console.log(
    `serving bench: digits v2; cache off vs on at a ${REPEAT * 100}% repeat rate (32 clients, 8 s); an NDJSON batch of ${BATCH_ITEMS} items vs raw ONNX Runtime at batch 32`,
  );
  const cache = await cacheOnOff();
  printTable("prediction cache", cache);
  const batch = await batchThroughput();
  printTable("offline batch prediction", [batch]);
  const on = cache.find((r) => r.cache === "on");
  const off = cache.find((r) => r.cache === "off");
  const ratios = {
    "cache on / off rps": round(Number(on?.rps) / Number(off?.rps), 2),
    "batch / raw rows/s": batch.ratio ?? 0,
  };
  printTable(
    "ratios",
    Object.entries(ratios).map(([ratio, value]) => ({ ratio, value })),
  );
  return { cache, batch, ratios };
}
