import { execFileSync } from "node:child_process";
import { startLocalCluster } from "../scripts/redis-cluster.js";
import { tempRepository } from "../test/helpers/model-repo.js";
import { samples } from "../test/helpers/samples.js";
import { launch, Stack, waitFor } from "../test/helpers/stack.js";
import { uniqueBodies } from "./classifier.js";
import { closedLoop, type LoadResult } from "./load.js";
import { printTable } from "./table.js";

/**
 * Ops/s one Redis shard is taken to sustain in the paper estimate: a conservative figure for
 * Redis 7 on one core with small commands and scripts, pipelined (redis-benchmark on this
 * machine is printed beside it, for what one of its cores does).
 */
const SHARD_OPS_CEILING = 100_000;
const SECONDS = 10;
/** The models of the mixed load, each on its own queue(s): mnist, digits (two versions), the CNN. */
const PREDICT = ["mnist", "digits", "digits-cnn"] as const;

/** INFO commandstats of one node: total calls (commands inside scripts included). */
function calls(port: number): number {
  const info = execFileSync("redis-cli", ["-p", String(port), "info", "commandstats"], {
    encoding: "utf8",
  });
  let total = 0;
  for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) total += Number(m[2]);
  return total;
}

/** SET throughput of one redis-server core, pipelined 16 deep, as redis-benchmark measures it. */
function benchmarkOneShard(port: number): number {
  try {
    const out = execFileSync(
      "redis-benchmark",
      ["-p", String(port), "-t", "set", "-n", "200000", "-P", "16", "-q", "-r", "100000"],
      { encoding: "utf8" },
    );
    return Math.round(Number(/SET: ([\d.]+) requests per second/.exec(out)?.[1] ?? Number.NaN));
  } catch {
    return Number.NaN;
  }
}

/**
 * `npm run bench -- cluster`: Ferry on a local Redis Cluster (3 primaries + 3 replicas):
 * Redis commands per request by shard under a mixed load of several models (sync predicts
 * on four model-version queues and durable async jobs), from which the request rate N shards
 * carry at a stated per-shard ceiling; and what a durable accept (WAIT 1) costs.
 */
export async function clusterBench(): Promise<Record<string, unknown>> {
  const cluster = await startLocalCluster();
  // the cache off: every request is a model run and its commands, as with unique inputs
  const repo = tempRepository(
    Object.fromEntries(PREDICT.map((m) => [m, { cache: { enabled: false } }])),
  );
  const redis = { url: "redis://127.0.0.1", clusterNodes: cluster.nodes.split(",") };
  const stack = new Stack({
    redis,
    env: { MODEL_REPOSITORY: repo, WORKER_MODELS: PREDICT.join(",") },
    apiEnv: { ACCEPT_REPLICAS: "1" },
  });
  try {
    await stack.start();
    const durable = stack.baseUrl;
    // a second API on the same cluster and workers, accepting without WAIT
    const plain = launch(
      "apps/api/src/main.ts",
      {
        ...process.env,
        REDIS_URL: redis.url,
        REDIS_CLUSTER_NODES: cluster.nodes,
        FERRY_PREFIX: stack.prefix,
        MODEL_REPOSITORY: repo,
        LOG_LEVEL: "warn",
        ACCEPT_REPLICAS: "0",
        PORT: String(Number(new URL(durable).port) + 1),
      },
      [],
    );
    const plainUrl = `http://127.0.0.1:${Number(new URL(durable).port) + 1}`;
    await waitFor(
      async () => (await fetch(`${plainUrl}/v2/health/ready`)).status === 200,
      30_000,
      plain,
    );

    const bodiesFor = (model: string, n: number, from: number) =>
      uniqueBodies(n, from, model === "digits" ? samples.digits.inputs : samples.mnist.inputs);
    const jobBodies = (n: number, from: number) =>
      bodiesFor("digits", n, from).map((b) => `{"model":"digits","input":${b}}`);
    // warm-up: every queue and connection in use before counting
    await Promise.all(
      PREDICT.map((m) =>
        closedLoop({
          url: `${durable}/v1/models/${m}/predict`,
          bodies: bodiesFor(m, 500, 1_000_000),
          concurrency: 4,
          durationMs: 1_000,
        }),
      ),
    );

    const primaries = cluster.primaries();
    const before = new Map(primaries.map((p) => [p, calls(p)]));
    const loads: Array<Promise<[string, LoadResult]>> = [
      ...PREDICT.map(
        async (m, k) =>
          [
            `predict ${m}`,
            await closedLoop({
              url: `${durable}/v1/models/${m}/predict`,
              bodies: bodiesFor(m, 60_000, k * 100_000),
              concurrency: 16,
              durationMs: SECONDS * 1_000,
            }),
          ] as [string, LoadResult],
      ),
      (async () =>
        [
          "async jobs (digits)",
          await closedLoop({
            url: `${durable}/v1/jobs`,
            bodies: jobBodies(20_000, 500_000),
            concurrency: 8,
            durationMs: SECONDS * 1_000,
          }),
        ] as [string, LoadResult])(),
    ];
    const results = await Promise.all(loads);
    const requests = results.reduce((s, [, r]) => s + r.requests, 0);
    const perShard = primaries.map((p) => ({
      port: p,
      commands: calls(p) - (before.get(p) ?? 0),
    }));
    const total = perShard.reduce((s, x) => s + x.commands, 0);
    const busiest = Math.max(...perShard.map((x) => x.commands));
    printTable(
      `Mixed load on a 3+3 Redis Cluster, ${SECONDS} s, unique inputs, cache off: 16 clients on each model's predict route (mnist, digits with its two versions, digits-cnn) and 8 submitting async digits jobs (ACCEPT_REPLICAS=1)`,
      results.map(([name, r]) => ({
        load: name,
        requests: r.requests,
        rps: r.rps,
        p50_ms: r.p50_ms,
        p99_ms: r.p99_ms,
        errors: r.errors,
      })),
    );
    printTable(
      "Redis commands per request by shard (INFO commandstats deltas of each primary, commands inside scripts included)",
      perShard.map((x) => ({
        shard: `:${x.port}`,
        commands: x.commands,
        per_request: (x.commands / requests).toFixed(2),
        share: `${((100 * x.commands) / total).toFixed(0)}%`,
      })),
    );
    const perRequest = total / requests;
    const oneCore = benchmarkOneShard(primaries[0] ?? 0);
    // the busiest shard saturates first: N shards carry N x ceiling x (its fair share / its share)
    const balance = total / primaries.length / busiest;
    const capacity = (n: number) => Math.round((n * SHARD_OPS_CEILING * balance) / perRequest);
    printTable(
      `On paper: requests/s N shards carry at ${SHARD_OPS_CEILING.toLocaleString()} commands/s per shard, at ${perRequest.toFixed(2)} commands per request and this load's balance (busiest shard ${(busiest / (total / primaries.length)).toFixed(2)}x the mean); redis-benchmark SET -P 16 on one of this machine's shards: ${oneCore.toLocaleString()}/s`,
      [1, 3, 6, 12].map((n) => ({ shards: n, requests_per_s: capacity(n).toLocaleString() })),
    );

    // what a durable accept costs: the same jobs through the API with WAIT 1 and the one without
    const accept = async (url: string, from: number) =>
      closedLoop({
        url: `${url}/v1/jobs`,
        bodies: jobBodies(5_000, from),
        concurrency: 4,
        durationMs: 5_000,
      });
    const waited = await accept(durable, 700_000);
    const unwaited = await accept(plainUrl, 710_000);
    const rows = [
      { accept: "ACCEPT_REPLICAS=1 (WAIT 1)", ...pick(waited) },
      { accept: "ACCEPT_REPLICAS=0", ...pick(unwaited) },
    ];
    printTable(
      "POST /v1/jobs latency, 4 clients, 5 s each, one after the other, same cluster and workers",
      rows,
    );
    plain.child.kill("SIGKILL");
    return {
      mixed: Object.fromEntries(results),
      commands_per_request: perRequest,
      by_shard: perShard,
      balance,
      shard_ops_ceiling: SHARD_OPS_CEILING,
      redis_benchmark_set_p16: oneCore,
      capacity: Object.fromEntries([1, 3, 6, 12].map((n) => [n, capacity(n)])),
      accept: rows,
    };
  } finally {
    await stack.stop();
    cluster.stop();
  }
}

function pick(r: LoadResult) {
  return { rps: r.rps, p50_ms: r.p50_ms, p99_ms: r.p99_ms, errors: r.errors };
}
