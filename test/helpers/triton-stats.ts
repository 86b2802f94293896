import type { Stack } from "./stack.js";

interface Duration {
  count: number;
  ns: number;
}

/** One version's figures from Triton's statistics extension. */
export interface VersionStats {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<string, Duration>;
  batch_stats: Array<{ batch_size: number; compute_infer: Duration }>;
}

/** The versions a statistics route lists (`/v2/models[/{name}[/versions/{v}]]/stats`). */
export async function statsAt(stack: Stack, path: string): Promise<VersionStats[]> {
  const res = await fetch(stack.url(path));
  if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
  return ((await res.json()) as { model_stats: VersionStats[] }).model_stats;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One version's statistics before some work and after it: every process adds its counts once
 * a second, so the "before" waits out what earlier work still has to add, and the "after"
 * waits until `rows` more computed rows show. `added(kind)` / `time(kind)`: what a kind of
 * `inference_stats` gained; `rows` / `runs`: rows and executions by batch size gained.
 */
export async function statsAcross(
  stack: Stack,
  model: string,
  version: string,
  rows: number,
  work: () => Promise<unknown>,
) {
  const read = async () => {
    const [stats] = await statsAt(stack, `/v2/models/${model}/versions/${version}/stats`);
    if (!stats) throw new Error(`no statistics for ${model} v${version}`);
    return stats;
  };
  await sleep(1_500);
  const before = await read();
  await work();
  let after = before;
  for (let k = 0; k < 50 && after.inference_count < before.inference_count + rows; k++) {
    await sleep(100);
    after = await read();
  }
  const gained = (f: (s: VersionStats) => number) => f(after) - f(before);
  return {
    before,
    after,
    added: (kind: string) => gained((s) => s.inference_stats[kind]?.count ?? 0),
    time: (kind: string) => gained((s) => s.inference_stats[kind]?.ns ?? 0),
    rows: gained((s) =>
      s.batch_stats.reduce((n, b) => n + b.batch_size * b.compute_infer.count, 0),
    ),
    runs: gained((s) => s.batch_stats.reduce((n, b) => n + b.compute_infer.count, 0)),
  };
}
