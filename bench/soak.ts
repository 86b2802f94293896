import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { samples } from "../test/helpers/samples.js";
import { readSse } from "../test/helpers/sse.js";
import { REDIS_URL, Stack } from "../test/helpers/stack.js";
import { round } from "./load.js";
import { printTable } from "./table.js";

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const SAMPLE_MS = 10_000;

const rssMb = (pid: number | undefined) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
const redisMb = () =>
  Number(
    /used_memory:(\d+)/.exec(
      execFileSync("redis-cli", ["-u", REDIS_URL, "info", "memory"], { encoding: "utf8" }),
    )?.[1] ?? 0,
  ) /
  2 ** 20;

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += ((xs[i] ?? 0) - mx) * ((ys[i] ?? 0) - my);
    den += ((xs[i] ?? 0) - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * `npm run bench -- soak`: mixed load for SOAK_MINUTES (10): sync predicts, async jobs polled
 * to completion and streaming completions, side by side; memory of the API, the worker and
 * Redis sampled every 10 s; the slope of each says whether something leaks.
 */
export async function soakBench(): Promise<Record<string, unknown>> {
  console.log(
    `soak: ${MINUTES} min of mixed load (8 predict clients, 2 async-job clients, 4 streaming clients), memory sampled every ${SAMPLE_MS / 1000} s`,
  );
  const stack = await new Stack({ env: { LOG_LEVEL: "error" } }).start();
  const until = Date.now() + MINUTES * 60_000;
  const counts = { predicts: 0, jobs: 0, streams: 0, errors: 0 };
  const loop = async (fn: () => Promise<boolean>) => {
    while (Date.now() < until) {
      if (await fn().catch(() => false)) continue;
      counts.errors++;
    }
  };
  const predict = async () => {
    const features = samples.digits.inputs[counts.predicts++ % 64];
    const res = await stack.post(
      "/v1/models/digits/predict",
      { features },
      { "Cache-Control": "no-cache" },
    );
    await res.arrayBuffer();
    return res.status === 200;
  };
  const job = async () => {
    const res = await stack.post("/v1/jobs", {
      model: "mnist",
      input: { features: samples.mnist.inputs[counts.jobs++ % 16] },
    });
    const { id } = (await res.json()) as { id: string };
    for (;;) {
      const view = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as { status: string };
      if (view.status === "succeeded") return true;
      if (view.status !== "queued" && view.status !== "running") return false;
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const completion = async () => {
    counts.streams++;
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Once upon a time",
      max_tokens: 48,
      temperature: 0.8,
      stream: true,
    });
    let done = false;
    await readSse(res, (e) => {
      if (e.data === "[DONE]") done = true;
      return undefined;
    });
    return done;
  };
  const rows: Array<Record<string, number>> = [];
  const started = Date.now();
  const sampler = setInterval(() => {
    rows.push({
      minute: round((Date.now() - started) / 60_000, 2),
      api_rss_mb: round(rssMb(stack.api.child.pid)),
      worker_rss_mb: round(rssMb(stack.workers[0]?.child.pid)),
      redis_mb: round(redisMb()),
      errors: counts.errors,
    });
  }, SAMPLE_MS);
  await Promise.all([
    ...Array.from({ length: 8 }, () => loop(predict)),
    ...Array.from({ length: 2 }, () => loop(job)),
    ...Array.from({ length: 4 }, () => loop(completion)),
  ]);
  clearInterval(sampler);
  await stack.stop();
  printTable("memory samples", rows);
  // the first two samples are warm-up (JIT, pools, first model loads)
  const steady = rows.slice(2);
  const minutes = steady.map((r) => r.minute ?? 0);
  const slopes = {
    "api MB/min": round(
      slope(
        minutes,
        steady.map((r) => r.api_rss_mb ?? 0),
      ),
    ),
    "worker MB/min": round(
      slope(
        minutes,
        steady.map((r) => r.worker_rss_mb ?? 0),
      ),
    ),
    "redis MB/min": round(
      slope(
        minutes,
        steady.map((r) => r.redis_mb ?? 0),
      ),
    ),
  };
  // Every job (async, and every completion: they are jobs too, resumable) is kept JOB_TTL_S
  // with its event log, and BullMQ needs Redis to run with noeviction: what one costs sizes
  // Redis for a deployment's traffic (kept jobs = jobs per second x JOB_TTL_S)
  const kept = counts.jobs + counts.streams;
  const grown = (rows.at(-1)?.redis_mb ?? 0) - (rows[0]?.redis_mb ?? 0);
  const perJob = { "redis KB per kept job": kept > 0 ? round((grown * 1024) / kept, 1) : 0 };
  printTable("totals and slopes (after warm-up)", [{ ...counts, ...slopes, ...perJob }]);
  return { minutes: MINUTES, counts, slopes, ...perJob, samples: rows };
}
