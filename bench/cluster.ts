import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startLocalCluster } from "../scripts/redis-cluster.js";
import { samples } from "../test/helpers/samples.js";
import { launch, Stack, waitFor } from "../test/helpers/stack.js";
import { uniqueBodies } from "./classifier.js";
import { commandsPer, redisCommandStats } from "./cpu.js";
import { closedLoop, type LoadResult } from "./load.js";
import { printTable } from "./table.js";

/**
 * Ops/s one Redis shard is taken to sustain in the paper estimate: a conservative figure for
 * Redis 7 on one core with small commands and scripts, pipelined (redis-benchmark on this
 * machine is printed beside it, for what one of its cores does).
 */
const SHARD_OPS_CEILING = 100_000;
const SECONDS = 10;
/** Models of the mixed load: copies of digits under eight names, so eight queues (tags). */
const MODELS = Array.from({ length: 8 }, (_, k) => `digits-${k}`);

/** INFO commandstats of one node: calls by command (commands inside scripts included). */
function calls(port: number): Map<string, number> {
  return redisCommandStats(`redis://127.0.0.1:${port}`);
}
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** PINGs one redis-server core answers, pipelined 16 deep, as redis-benchmark measures it. */
function benchmarkOneShard(port: number): number {
  try {
    const out = execFileSync(
      "redis-benchmark",
      ["-p", String(port), "-t", "ping_mbulk", "-n", "400000", "-P", "16", "-q"],
      { encoding: "utf8" },
    );
    return Math.round(
      Number(/PING_MBULK: ([\d.]+) requests per second/.exec(out)?.[1] ?? Number.NaN),
    );
  } catch {
    return Number.NaN;
  }
}

/** A model repository of MODELS: digits under each name, its cache off (every request runs). */
function copiesOfDigits(): string {
  const root = mkdtempSync(join(tmpdir(), "ferry-bench-models-"));
  for (const name of MODELS) {
    cpSync("models/digits", join(root, name), { recursive: true });
    const path = join(root, name, "model.json");
    const config = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    writeFileSync(path, JSON.stringify({ ...config, name, cache: { enabled: false } }));
  }
  return root;
}

interface ShardCount {
  port: number;
  commands: number;
  by_command: string;
}

/** Runs `load` and counts each primary's commands meanwhile. */
async function countByShard<T>(
  primaries: number[],
  load: () => Promise<T>,
): Promise<{ result: T; shards: (requests: number) => ShardCount[] }> {
  const before = new Map(primaries.map((p) => [p, calls(p)]));
  const result = await load();
  const after = new Map(primaries.map((p) => [p, calls(p)]));
  return {
    result,
    shards: (requests) =>
      primaries.map((port) => {
        const was = before.get(port) ?? new Map<string, number>();
        const now = after.get(port) ?? new Map<string, number>();
        return {
          port,
          commands: sum(now) - sum(was),
          by_command: commandsPer(was, now, requests).by_command,
        };
      }),
  };
}

/** Per-shard table and the on-paper capacity of N shards for one kind of request. */
function report(kind: string, requests: number, shards: ShardCount[]) {
  const total = shards.reduce((s, x) => s + x.commands, 0);
  const busiest = Math.max(...shards.map((x) => x.commands));
  const perRequest = total / Math.max(1, requests);
  // the busiest shard saturates first: N shards carry N x ceiling x (mean share / its share)
  const balance = total / shards.length / Math.max(1, busiest);
  const capacity = (n: number) => Math.round((n * SHARD_OPS_CEILING * balance) / perRequest);
  printTable(
    `${kind}: Redis commands per request by shard (INFO commandstats deltas of each primary, commands inside scripts included), ${requests} requests`,
    shards.map((x) => ({
      shard: `:${x.port}`,
      commands: x.commands,
      per_request: (x.commands / Math.max(1, requests)).toFixed(2),
      share: `${((100 * x.commands) / Math.max(1, total)).toFixed(0)}%`,
      by_command: x.by_command,
    })),
  );
  printTable(
    `${kind}, on paper: requests/s N shards carry at ${SHARD_OPS_CEILING.toLocaleString()} commands/s per shard, at ${perRequest.toFixed(2)} commands per request and this load's balance (busiest shard ${(1 / balance).toFixed(2)}x the mean)`,
    [1, 3, 6, 12].map((n) => ({ shards: n, requests_per_s: capacity(n).toLocaleString() })),
  );
  return {
    requests,
    commands_per_request: perRequest,
    by_shard: shards,
    balance,
    capacity: Object.fromEntries([1, 3, 6, 12].map((n) => [n, capacity(n)])),
  };
}

/**
 * `npm run bench -- cluster`: Ferry on a local Redis Cluster (3 primaries + 3 replicas), with
 * eight models (eight queues, so eight hash tags): Redis commands per request by shard for
 * sync predicts and for durable async jobs, from which the request rate N shards carry at a
 * stated per-shard ceiling; and what a durable accept (WAIT 1) costs in latency.
 */
export async function clusterBench(): Promise<Record<string, unknown>> {
  const cluster = await startLocalCluster();
  const repo = copiesOfDigits();
  const redis = { url: "redis://127.0.0.1", clusterNodes: cluster.nodes.split(",") };
  const stack = new Stack({
    redis,
    env: { MODEL_REPOSITORY: repo },
    apiEnv: { ACCEPT_REPLICAS: "1" },
  });
  let plain: ReturnType<typeof launch> | undefined;
  try {
    await stack.start();
    const durable = stack.baseUrl;
    // a second API on the same cluster and workers, accepting without WAIT
    const plainPort = Number(new URL(durable).port) + 1;
    plain = launch(
      "apps/api/src/main.ts",
      {
        ...process.env,
        REDIS_URL: redis.url,
        REDIS_CLUSTER_NODES: cluster.nodes,
        FERRY_PREFIX: stack.prefix,
        MODEL_REPOSITORY: repo,
        LOG_LEVEL: "warn",
        ACCEPT_REPLICAS: "0",
        PORT: String(plainPort),
      },
      [],
    );
    const plainUrl = `http://127.0.0.1:${plainPort}`;
    await waitFor(
      async () => (await fetch(`${plainUrl}/v2/health/ready`)).status === 200,
      30_000,
      plain,
    );
    const bodies = (n: number, from: number) => uniqueBodies(n, from, samples.digits.inputs);
    const jobBodies = (model: string, n: number, from: number) =>
      bodies(n, from).map((b) => `{"model":"${model}","input":${b}}`);
    const mixed = (
      route: (m: string, k: number) => { url: string; bodies: string[] },
      clients: number,
    ) =>
      Promise.all(
        MODELS.map(async (m, k) => {
          const { url, bodies } = route(m, k);
          return closedLoop({ url, bodies, concurrency: clients, durationMs: SECONDS * 1_000 });
        }),
      );
    // warm-up: every queue and connection in use before counting
    await Promise.all(
      MODELS.map((m, k) =>
        closedLoop({
          url: `${durable}/v1/models/${m}/predict`,
          bodies: bodies(200, 1_000_000 + k * 1_000),
          concurrency: 2,
          durationMs: 1_000,
        }),
      ),
    );
    const primaries = cluster.primaries();

    const sync = await countByShard(primaries, () =>
      mixed(
        (m, k) => ({
          url: `${durable}/v1/models/${m}/predict`,
          bodies: bodies(40_000, k * 100_000),
        }),
        8,
      ),
    );
    const async = await countByShard(primaries, () =>
      mixed(
        (m, k) => ({
          url: `${durable}/v1/jobs`,
          bodies: jobBodies(m, 10_000, 2_000_000 + k * 100_000),
        }),
        2,
      ),
    );
    const summary = (name: string, results: LoadResult[]) => {
      const requests = results.reduce((s, r) => s + r.requests, 0);
      return {
        load: name,
        requests,
        rps: Math.round(requests / SECONDS),
        p50_ms_per_model: results.map((r) => r.p50_ms).join(" "),
        errors: results.reduce((s, r) => s + r.errors, 0),
      };
    };
    const rows = [
      summary("sync predicts, 8 clients per model", sync.result),
      summary("async jobs (ACCEPT_REPLICAS=1), 2 clients per model", async.result),
    ];
    printTable(
      `Eight models (copies of digits, eight queues) on a 3+3 Redis Cluster, ${SECONDS} s per load, unique inputs, cache off`,
      rows,
    );
    const oneCore = benchmarkOneShard(primaries[0] ?? 0);
    console.log(
      `\nredis-benchmark PING_MBULK -P 16 on one shard of this machine: ${oneCore.toLocaleString()}/s (the paper ceiling below is ${SHARD_OPS_CEILING.toLocaleString()} commands/s)`,
    );
    const syncReport = report(
      "sync predicts",
      rows[0]?.requests ?? 0,
      sync.shards(rows[0]?.requests ?? 0),
    );
    const asyncReport = report(
      "async jobs",
      rows[1]?.requests ?? 0,
      async.shards(rows[1]?.requests ?? 0),
    );

    // what a durable accept costs: the same jobs through the API with WAIT 1 and the one without
    const accept = (url: string, from: number) =>
      closedLoop({
        url: `${url}/v1/jobs`,
        bodies: jobBodies("digits-0", 5_000, from),
        concurrency: 4,
        durationMs: 5_000,
      });
    const waited = await accept(durable, 7_000_000);
    const unwaited = await accept(plainUrl, 7_100_000);
    const accepts = [
      { accept: "ACCEPT_REPLICAS=1 (WAIT 1)", ...pick(waited) },
      { accept: "ACCEPT_REPLICAS=0", ...pick(unwaited) },
    ];
    printTable(
      "POST /v1/jobs latency, 4 clients, 5 s each, one after the other, same cluster and workers",
      accepts,
    );
    return {
      loads: rows,
      sync: syncReport,
      async: asyncReport,
      shard_ops_ceiling: SHARD_OPS_CEILING,
      redis_benchmark_ping_p16: oneCore,
      accept: accepts,
    };
  } finally {
    plain?.child.kill("SIGKILL");
    await stack.stop();
    cluster.stop();
    rmSync(repo, { recursive: true, force: true });
  }
}

function pick(r: LoadResult) {
  return { rps: r.rps, p50_ms: r.p50_ms, p99_ms: r.p99_ms, errors: r.errors };
}
