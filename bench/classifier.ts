import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { InProcessSession } from "@ferry/runtime";
import { freePort } from "../scripts/free-port.js";
import { tempRepository } from "../test/helpers/model-repo.js";
import { samples } from "../test/helpers/samples.js";
import { REDIS_TARGET, Stack, waitFor } from "../test/helpers/stack.js";
import { commandsPer, cpuMeter, redisCommandStats, redisPid } from "./cpu.js";
import { HttpConnection } from "./http-client.js";
import {
  closedLoop,
  type LoadResult,
  median,
  probeWhile,
  round,
  type StatusLatency,
} from "./load.js";
import { printTable } from "./table.js";

/**
 * Request bodies no earlier request sent (a held-out row with one pixel nudged by the
 * request's number), so that no answer comes from the prediction cache: every row is a model
 * run, as it is for a service whose users send new inputs.
 */
export function uniqueBodies(n: number, from = 0, rows = samples.mnist.inputs): string[] {
  return Array.from({ length: n }, (_, i) => {
    const k = from + i;
    const base = rows[k % rows.length] ?? [];
    const at = Math.floor(k / rows.length) % base.length;
    const step = 1 + Math.floor(k / (rows.length * base.length));
    return JSON.stringify({
      features: base.map((v, i) => (i === at ? Math.round((v + step * 1e-3) * 1e6) / 1e6 : v)),
    });
  });
}

const warmBodies = uniqueBodies(16);

/** (a) ONNX Runtime in this process, no server: the most rows/s the model allows. */
/** The two 784-input classifiers: the seed's MLP (microseconds a row) and a compute-bound CNN. */
const MODELS = ["mnist", "digits-cnn"] as const;
type Model = (typeof MODELS)[number];

async function rawOnnx(model: Model, batches = [1, 32]): Promise<Record<string, number>> {
  const session = await InProcessSession.load(`models/${model}/1/model.onnx`, {
    executionProvider: "cpu",
    intraOpThreads: 1,
  });
  const rate = async (batch: number) => {
    const data = Float32Array.from(
      { length: batch * 784 },
      (_, k) => samples.mnist.inputs[0]?.[k % 784] ?? 0,
    );
    for (let i = 0; i < 200; i++)
      await session.run({ input: { data: data.slice(), dims: [batch, 784] } });
    let rows = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 2_000) {
      await session.run({ input: { data: data.slice(), dims: [batch, 784] } });
      rows += batch;
    }
    return round(rows / ((performance.now() - t0) / 1000), 0);
  };
  const result: Record<string, number> = {};
  for (const batch of batches) result[`batch_${batch}_rows_per_s`] = await rate(batch);
  await session.release();
  return result;
}

let sentSoFar = 0;
/** The next `n` bodies no earlier run sent (a run longer than `n` requests would repeat). */
function fresh(n: number): string[] {
  const out = uniqueBodies(n, sentSoFar);
  sentSoFar += n;
  return out;
}

/**
 * Every server is measured warm: 2 s at 64 clients first, so that its JIT has compiled the
 * serving path (a second at one client is ~200 requests, and left Ferry's one-client row
 * measuring V8's interpreter: p50 ~5 ms cold against ~2 ms warm, CPU per request 2-3x), then,
 * for a row at fewer clients, 2,000 requests at that concurrency: one row at a time takes paths
 * that 64 clients never do (a batch of one, a lane read per row), and V8 was still compiling
 * them through Ferry's first ~2,000 one-client requests (--trace-opt: 146, 46, 8 and 2
 * optimizations in the worker per successive thousand; p50 1.9, 1.6, 1.5 ms).
 */
async function warmUp(url: string, concurrency = 64): Promise<void> {
  await closedLoop({ url, bodies: fresh(20_000), concurrency: 64, durationMs: 2_000 });
  if (concurrency < 64) await closedLoop({ url, bodies: fresh(2_000), concurrency, total: 2_000 });
}

async function measure(url: string, concurrency: number, durationMs: number): Promise<LoadResult> {
  await warmUp(url, concurrency);
  return closedLoop({ url, bodies: fresh(60_000), concurrency, durationMs });
}

/**
 * A load result with what each request cost: Redis commands, and CPU of API / worker / Redis /
 * the load generator.
 */
interface CostedResult extends LoadResult {
  redis_cmds_per_req: number;
  redis_cmds_by_command: string;
  cpu_us_per_req: string;
  /** Rows per batch the worker formed during the run (its batch-size histogram). */
  mean_batch_size: number;
}

/** Sum and count of the worker's batch-size histogram, from its /metrics. */
async function batchSizes(stack: Stack): Promise<{ sum: number; count: number }> {
  const url = stack.workers[0]?.metricsUrl;
  if (!url) return { sum: 0, count: 0 };
  const text = await (await fetch(url)).text();
  const total = (suffix: string) =>
    [...text.matchAll(new RegExp(`^ferry_worker_batch_size_${suffix}\\{[^}]*\\} (\\S+)$`, "gm"))]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
  return { sum: total("sum"), count: total("count") };
}

async function measureCosted(
  stack: Stack,
  url: string,
  concurrency: number,
  durationMs: number,
): Promise<CostedResult> {
  await warmUp(url, concurrency);
  // made before the meter starts: 60,000 bodies are seconds of this process's CPU
  const bodies = fresh(60_000);
  const meter = cpuMeter({
    api: stack.api.child.pid,
    worker: stack.workers[0]?.child.pid,
    redis: redisPid(REDIS_TARGET),
    // this load generator: it shares the machine's cores with what it measures
    client: process.pid,
  });
  const commands = redisCommandStats(REDIS_TARGET);
  const batches = await batchSizes(stack);
  const r = await closedLoop({ url, bodies, concurrency, durationMs });
  const total = r.requests + r.errors;
  const cmds = commandsPer(commands, redisCommandStats(REDIS_TARGET), total);
  const after = await batchSizes(stack);
  return {
    ...r,
    redis_cmds_per_req: cmds.total,
    redis_cmds_by_command: cmds.by_command,
    cpu_us_per_req: meter.perUnit(total),
    mean_batch_size: round((after.sum - batches.sum) / Math.max(1, after.count - batches.count), 1),
  };
}

/** (b) Ferry over HTTP: API and one worker as separate processes, Redis in between. */
async function ferry(model: Model): Promise<Record<string, CostedResult>> {
  const stack = await new Stack({ env: { WORKER_MODELS: model } }).start();
  try {
    const url = stack.url(`/v1/models/${model}/predict`);
    return {
      c1: await measureCosted(stack, url, 1, 5_000),
      c64: await measureCosted(stack, url, 64, 8_000),
    };
  } finally {
    await stack.stop();
  }
}

/**
 * How long the overload run lasts, how many connections it holds open, and after how long its
 * answers are also reported apart from the opening burst (every client's first request at once).
 */
const OVERLOAD = { connections: 3_000, durationMs: 15_000, steadyAfterMs: 1_000 };

/** The overload's clients: each on a connection opened before the clock starts. */
function flood(url: string, honourRetryAfter: boolean, onStart?: () => void): Promise<LoadResult> {
  return closedLoop({
    url,
    bodies: fresh(200_000),
    concurrency: OVERLOAD.connections,
    durationMs: OVERLOAD.durationMs,
    connectFirst: true,
    honourRetryAfter,
    steadyAfterMs: OVERLOAD.steadyAfterMs,
    onStart,
  });
}

/**
 * An overload run, with the latency of a readiness probe every 100 ms while it lasts, on the
 * main port and on the probe port (PROBE_PORT).
 */
interface FloodResult extends LoadResult {
  probes?: StatusLatency;
  probes_probe_port?: StatusLatency;
}

function clientsOf(honourRetryAfter: boolean): string {
  return honourRetryAfter ? "honour Retry-After" : "send again at once";
}

/**
 * (f) Overload: far more closed-loop clients than the stack can serve, each on a connection
 * opened before the clock starts, shipped defaults (QUEUE_WAIT_BUDGET_MS 5 s): clients that
 * send again the moment they are answered, 429 or not (a load generator), and clients that
 * wait the Retry-After they are given (the openai client, most SDKs).
 */
async function overload(model: Model): Promise<Record<string, FloodResult>> {
  const out: Record<string, FloodResult> = {};
  for (const honourRetryAfter of [false, true]) {
    const probePort = await freePort();
    const stack = await new Stack({
      env: { WORKER_MODELS: model },
      apiEnv: { PROBE_PORT: String(probePort) },
    }).start();
    try {
      const url = stack.url(`/v1/models/${model}/predict`);
      // warm: the JIT has compiled the serving path (the service rate measured here goes
      // stale while 3,000 clients connect; the flood's first second measures it again)
      await closedLoop({ url, bodies: fresh(5_000), concurrency: 64, durationMs: 2_000 });
      let clockStarted = () => {};
      const connected = new Promise<void>((resolve) => (clockStarted = resolve));
      const run = flood(url, honourRetryAfter, clockStarted);
      // once the flood's clients are connected, as a kubelet would (timeoutSeconds 1 by
      // default): an API too busy to answer in time is taken out of its Service, or restarted
      await connected;
      const [probes, probesProbePort] = await Promise.all([
        probeWhile(stack.url("/v2/health/ready"), 100, run),
        probeWhile(`http://127.0.0.1:${probePort}/v2/health/ready`, 100, run),
      ]);
      out[clientsOf(honourRetryAfter)] = {
        ...(await run),
        probes,
        probes_probe_port: probesProbePort,
      };
    } finally {
      await stack.stop();
    }
  }
  return out;
}

/**
 * (f') The floor of (f): the same clients against a bare node:http server that answers every
 * request 429 the moment its body arrived, and does nothing else. No admission policy can
 * make a refusal arrive sooner than this machine lets any Node server answer at all.
 */
async function overloadFloor(): Promise<Record<string, LoadResult>> {
  const port = await freePort();
  const args = ["--conditions=ferry-source", "--import", "tsx", "bench/peers/refuse-all-server.ts"];
  return withPeer(process.execPath, [...args, String(port)], port, "/", 429, async (url) => {
    const out: Record<string, LoadResult> = {};
    for (const honourRetryAfter of [false, true])
      out[clientsOf(honourRetryAfter)] = await flood(url, honourRetryAfter);
    return out;
  });
}

/** Rounds of the seed's exercise per batch size, measured in adjacent pairs. */
const SEED_ROUNDS = 11;

/**
 * (c) The seed's exercise through Ferry: 200 concurrent requests, max_batch_size 1 vs 32. The
 * 200 clients keep their connections across the rounds, as one client's pool does (asyncio.gather
 * over one HTTP client in the seed): a round that opened 200 new TCP connections measured the
 * connection set-up, which no batch size changes. A round is 0.1-0.3 s, and this VM's pace
 * drifts by tens of percent within a minute (five rounds of one size, then five of the other,
 * gave 2.3x and 3.4x in two runs minutes apart): both stacks are up at once and measured in
 * adjacent rounds, alternating which goes first, and the headline is the median of the pairs'
 * ratios.
 */
async function seedExercise(model: Model): Promise<Record<string, Record<string, number>>> {
  const sides = [1, 32].map((size) => ({
    size,
    stack: new Stack({
      env: {
        MODEL_REPOSITORY: tempRepository({
          [model]: {
            max_batch_size: size,
            dynamic_batching: { preferred_batch_sizes: [], max_queue_delay_ms: 2 },
          },
        }),
        WORKER_MODELS: model,
      },
    }),
    connections: [] as HttpConnection[],
    rounds: [] as LoadResult[],
  }));
  try {
    for (const side of sides) {
      await side.stack.start();
      const url = new URL(side.stack.url("/"));
      side.connections.push(...Array.from({ length: 200 }, () => new HttpConnection(url)));
    }
    const load = (side: (typeof sides)[number], opts: { total: number } | { durationMs: number }) =>
      closedLoop({
        url: side.stack.url(`/v1/models/${model}/predict`),
        bodies: fresh("total" in opts ? opts.total : 20_000),
        concurrency: 200,
        connections: side.connections,
        ...opts,
      });
    // warm: the connections open, and the JIT has compiled the serving path
    for (const side of sides) await load(side, { durationMs: 2_000 });
    const ratios: number[] = [];
    for (let r = 0; r < SEED_ROUNDS; r++) {
      for (const side of r % 2 === 0 ? sides : [...sides].reverse())
        side.rounds.push(await load(side, { total: 200 }));
      const [one, batched] = sides.map((side) => side.rounds[r]?.rps ?? 0);
      ratios.push((batched ?? 0) / (one || 1));
    }
    const out: Record<string, Record<string, number>> = {};
    for (const { size, rounds } of sides)
      out[`max_batch_size_${size}`] = {
        rps_median: median(rounds.map((r) => r.rps)),
        p50_ms_median: median(rounds.map((r) => r.p50_ms)),
        errors: rounds.reduce((s, r) => s + r.errors, 0),
      };
    out.adjacent = { batch32_over_batch1_median: round(median(ratios), 3), pairs: ratios.length };
    return out;
  } finally {
    for (const side of sides) for (const c of side.connections) c.close();
    await Promise.all(sides.map((side) => side.stack.stop()));
  }
}

/**
 * Runs a peer server (`command args`, listening on 127.0.0.1:`port`) until `use` is done,
 * once a POST of an input to `path` answers `readyStatus`.
 */
async function withPeer<T>(
  command: string,
  args: string[],
  port: number,
  path: string,
  readyStatus: number,
  use: (url: string) => Promise<T>,
): Promise<T> {
  const child: ChildProcess = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((r) => child.on("exit", r));
  try {
    const url = `http://127.0.0.1:${port}${path}`;
    await waitFor(
      async () =>
        (
          await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: warmBodies[0] ?? "{}",
          })
        ).status === readyStatus,
      60_000,
      { child, output, exited },
    );
    return await use(url);
  } finally {
    child.kill("SIGTERM");
  }
}

/** A peer's /predict at 1 and at 64 clients. */
function serveAndMeasure(
  command: string,
  args: string[],
  port: number,
  path: string,
): Promise<Record<string, LoadResult>> {
  return withPeer(command, args, port, path, 200, async (url) => ({
    c1: await measure(url, 1, 5_000),
    c64: await measure(url, 64, 8_000),
  }));
}

/** (d) The seed's FastAPI + PyTorch server, when Debian's fastapi and uvicorn are installed. */
async function peer(): Promise<Record<string, LoadResult> | string> {
  const probe = spawnSync("/usr/bin/python3", ["-c", "import fastapi, uvicorn, torch, onnx"]);
  if (probe.status !== 0)
    return "skipped: needs apt-get install python3-fastapi python3-uvicorn python3-torch python3-onnx";
  const port = await freePort();
  return serveAndMeasure(
    "/usr/bin/python3",
    ["bench/peers/fastapi_server.py", "--port", String(port)],
    port,
    "/predict",
  );
}

/** The bare node:http + in-process ONNX Runtime server's command line, on `port`. */
function inProcessArgs(port: number): string[] {
  return [
    "--conditions=ferry-source",
    "--import",
    "tsx",
    "bench/peers/in-process-server.ts",
    `${port}`,
  ];
}

/** (e) A bare node:http server running ONNX Runtime in process: what the queue hop costs. */
async function inProcessServer(): Promise<Record<string, LoadResult>> {
  const port = await freePort();
  return serveAndMeasure(process.execPath, inProcessArgs(port), port, "/");
}

/** One round of (e'): both servers at 64 clients and at one client, back to back. */
interface PairedRound {
  first: string;
  ferry_c64_rps: number;
  in_process_c64_rps: number;
  c64_ratio: number;
  ferry_c64_rps_node_http: number;
  in_process_c64_rps_node_http: number;
  c64_ratio_node_http: number;
  ferry_c1_p50_ms: number;
  in_process_c1_p50_ms: number;
  c1_p50_diff_ms: number;
}

/**
 * (e') Ferry on mnist against the in-process server in adjacent rounds, both up at once and
 * measured in turn, each round in the other order: this VM's pace drifts by tens of percent
 * within minutes (the in-process server alone measured 7,200 and 11,200 req/s on one
 * afternoon), and rows measured minutes apart, as (b) and (e) are, carry that drift into their
 * ratio; a ratio of adjacent rounds carries little of it. 5 s at 64 clients, then 5 s at 64
 * clients on node:http's client (what the load generator's own CPU takes from each server:
 * the rest of the bench uses `HttpConnection`), then 3 s at one.
 */
async function pairedRounds(rounds = 3): Promise<PairedRound[]> {
  const port = await freePort();
  const stack = await new Stack({ env: { WORKER_MODELS: "mnist" } }).start();
  try {
    return await withPeer(process.execPath, inProcessArgs(port), port, "/", 200, async (local) => {
      const servers = { ferry: stack.url("/v1/models/mnist/predict"), in_process: local };
      for (const url of Object.values(servers)) await warmUp(url, 1);
      const c64 = (url: string, nodeHttp: boolean) =>
        closedLoop({ url, bodies: fresh(60_000), concurrency: 64, durationMs: 5_000, nodeHttp });
      const both = async (url: string) => ({
        c64: await c64(url, false),
        c64_node_http: await c64(url, true),
        c1: await closedLoop({ url, bodies: fresh(20_000), concurrency: 1, durationMs: 3_000 }),
      });
      const out: PairedRound[] = [];
      for (let r = 0; r < rounds; r++) {
        const ferryFirst = r % 2 === 0;
        const first = await both(ferryFirst ? servers.ferry : servers.in_process);
        const second = await both(ferryFirst ? servers.in_process : servers.ferry);
        const [ferry, inProc] = ferryFirst ? [first, second] : [second, first];
        out.push({
          first: ferryFirst ? "ferry" : "in_process",
          ferry_c64_rps: ferry.c64.rps,
          in_process_c64_rps: inProc.c64.rps,
          c64_ratio: round(ferry.c64.rps / (inProc.c64.rps || 1), 3),
          ferry_c64_rps_node_http: ferry.c64_node_http.rps,
          in_process_c64_rps_node_http: inProc.c64_node_http.rps,
          c64_ratio_node_http: round(ferry.c64_node_http.rps / (inProc.c64_node_http.rps || 1), 3),
          ferry_c1_p50_ms: ferry.c1.p50_ms,
          in_process_c1_p50_ms: inProc.c1.p50_ms,
          c1_p50_diff_ms: round(ferry.c1.p50_ms - inProc.c1.p50_ms, 3),
        });
      }
      return out;
    });
  } finally {
    await stack.stop();
  }
}

export async function classifierBench(): Promise<Record<string, unknown>> {
  console.log(
    "classifier bench: mnist (784-256-10 MLP) and digits-cnn (two 3x3 convs, the second strided, + 1568-3000-10 head, 19 MB of float32 weights in memory, compute-bound), 1 intra-op thread everywhere, closed-loop keep-alive clients on 127.0.0.1 (bench/http-client.ts: a lean HTTP/1.1 client, ~60 us of CPU a request where node:http's takes ~125, on the cores the stack uses), in this process; every request sends an input no earlier one sent (no cache hits), shipped model.json defaults",
  );
  const raw = Object.fromEntries(await seq(MODELS, async (m) => [m, await rawOnnx(m)] as const));
  printTable(
    "(a) raw ONNX Runtime in process, no server",
    MODELS.map((m) => ({
      model: m,
      ...raw[m],
      batch_32_over_1: round(
        (raw[m]?.batch_32_rows_per_s ?? 0) / (raw[m]?.batch_1_rows_per_s ?? 1),
        2,
      ),
    })),
  );
  const ferryRes = Object.fromEntries(await seq(MODELS, async (m) => [m, await ferry(m)] as const));
  const inProc = await inProcessServer();
  const paired = await pairedRounds();
  const peerRes = await peer();
  const rows: Array<Record<string, string | number>> = [];
  const add = (name: string, r: Record<string, LoadResult | CostedResult>) => {
    for (const [c, v] of Object.entries(r))
      rows.push({
        server: name,
        clients: c.slice(1),
        rps: v.rps,
        p50_ms: v.p50_ms,
        p99_ms: v.p99_ms,
        errors: v.errors,
        redis_cmds_per_req: "redis_cmds_per_req" in v ? v.redis_cmds_per_req : "",
        cpu_us_per_req_api_worker_redis_client: "cpu_us_per_req" in v ? v.cpu_us_per_req : "",
        mean_batch: "mean_batch_size" in v ? v.mean_batch_size : "",
      });
  };
  for (const m of MODELS) add(`ferry ${m} (api + worker + redis)`, ferryRes[m] ?? {});
  add("node:http + in-process ORT (mnist)", inProc);
  if (typeof peerRes === "string") console.log(`\n(d) peer ${peerRes}`);
  else add("seed FastAPI + PyTorch (mnist)", peerRes);
  printTable(
    "(b, d, e) HTTP /predict, each row after a 2 s warm-up at 64 clients: 5 s at 1 client, 8 s at 64 clients",
    rows,
  );
  printTable(
    "(e') Ferry mnist and the in-process server in adjacent rounds (both up, measured in turn, alternating which goes first): 5 s at 64 clients, the same on node:http's client (_node_http), then 3 s at one client",
    paired.map((r, i) => ({ round: i + 1, ...r })),
  );
  printTable(
    "Redis commands per request, by command (INFO commandstats delta over the run, commands inside scripts included)",
    MODELS.flatMap((m) =>
      Object.entries(ferryRes[m] ?? {}).map(([c, v]) => ({
        model: m,
        clients: c.slice(1),
        total: v.redis_cmds_per_req,
        by_command: v.redis_cmds_by_command,
      })),
    ),
  );
  // raw ORT at the batch size Ferry formed at 64 clients: what its serving path leaves of it
  const formed = Object.fromEntries(
    await seq(MODELS, async (m) => {
      const batch = Math.max(1, Math.round(ferryRes[m]?.c64?.mean_batch_size ?? 1));
      const rawAt = (await rawOnnx(m, [batch]))[`batch_${batch}_rows_per_s`] ?? 0;
      return [m, { batch, raw_rows_per_s: rawAt, ferry_rps: ferryRes[m]?.c64?.rps ?? 0 }] as const;
    }),
  );
  printTable(
    "(b') Ferry at 64 clients vs raw ONNX Runtime at the batch size Ferry formed",
    MODELS.map((m) => ({
      model: m,
      mean_batch_formed: formed[m]?.batch ?? 0,
      raw_rows_per_s_at_that_batch: formed[m]?.raw_rows_per_s ?? 0,
      ferry_c64_rps: formed[m]?.ferry_rps ?? 0,
      ratio: round((formed[m]?.ferry_rps ?? 0) / (formed[m]?.raw_rows_per_s || 1), 3),
    })),
  );
  const over = await overload("mnist");
  const floor = await overloadFloor();
  const statusRows = (server: string, runs: Record<string, FloodResult>) =>
    Object.entries(runs).flatMap(([clients, r]) => [
      ...Object.entries(r.by_status).map(([status, v]) => ({ server, clients, status, ...v })),
      ...Object.entries(r.steady_by_status ?? {}).map(([status, v]) => ({
        server,
        clients: `${clients}, sent after ${OVERLOAD.steadyAfterMs / 1000} s`,
        status,
        ...v,
      })),
      ...(r.probes ? [{ server, clients, status: "GET /v2/health/ready", ...r.probes }] : []),
      ...(r.probes_probe_port
        ? [{ server, clients, status: "the same on PROBE_PORT", ...r.probes_probe_port }]
        : []),
    ]);
  printTable(
    `(f) overload: ${OVERLOAD.connections} closed-loop clients for ${OVERLOAD.durationMs / 1000} s, connections opened first; Ferry on mnist (QUEUE_WAIT_BUDGET_MS 5000), with a readiness probe on a new connection every 100 ms, on the main port and on PROBE_PORT; and (f') the floor: a node:http server that answers 429 to everything at once`,
    [...statusRows("ferry mnist", over), ...statusRows("refuse-all node:http", floor)],
  );
  for (const [clients, r] of Object.entries(over))
    for (const [status, text] of Object.entries(r.first_error_body))
      console.log(`ferry mnist, ${clients}: the first ${status} said ${text}`);
  const seed = Object.fromEntries(
    await seq(MODELS, async (m) => [m, await seedExercise(m)] as const),
  );
  printTable(
    `(c) the seed's exercise through Ferry: rounds of 200 concurrent requests, ${SEED_ROUNDS} per batch size, both stacks up, adjacent rounds alternating which goes first; medians`,
    MODELS.flatMap((m) =>
      Object.entries(seed[m] ?? {})
        .filter(([k]) => k !== "adjacent")
        .map(([k, v]) => ({ model: m, config: k, ...v })),
    ),
  );
  const mnist = ferryRes.mnist ?? {};
  const ratios: Record<string, number> = {
    "mnist: ferry_c64_rps / in_process_c64_rps": round(
      (mnist.c64?.rps ?? 0) / (inProc.c64?.rps ?? 1),
      3,
    ),
    "mnist: ferry_c1_p50 - in_process_c1_p50 (ms)": round(
      (mnist.c1?.p50_ms ?? 0) - (inProc.c1?.p50_ms ?? 0),
      3,
    ),
    "mnist: ferry_c64_rps / in_process_c64_rps, adjacent rounds (median)": round(
      median(paired.map((r) => r.c64_ratio)),
      3,
    ),
    "mnist: ferry_c64_rps / in_process_c64_rps, adjacent rounds, node:http's client (median)":
      round(median(paired.map((r) => r.c64_ratio_node_http)), 3),
    "mnist: ferry_c1_p50 - in_process_c1_p50 (ms), adjacent rounds (median)": round(
      median(paired.map((r) => r.c1_p50_diff_ms)),
      3,
    ),
    "mnist: ferry_c64_p99 / ferry_c64_p50": round(
      (mnist.c64?.p99_ms ?? 0) / (mnist.c64?.p50_ms ?? 1),
      2,
    ),
    "digits-cnn: ferry_c64_rps / raw_rows_per_s at the batch formed": round(
      (formed["digits-cnn"]?.ferry_rps ?? 0) / (formed["digits-cnn"]?.raw_rows_per_s || 1),
      3,
    ),
  };
  for (const [clients, r] of Object.entries(over)) {
    ratios[`overload (${clients}): 429 p99 (ms)`] = r.by_status["429"]?.p99_ms ?? Number.NaN;
    ratios[`overload (${clients}): admitted (200) p99 (ms)`] =
      r.by_status["200"]?.p99_ms ?? Number.NaN;
    ratios[`overload (${clients}): 429 p99 after the opening burst (ms)`] =
      r.steady_by_status?.["429"]?.p99_ms ?? Number.NaN;
    ratios[`overload (${clients}): readiness probe p99 (ms)`] = r.probes?.p99_ms ?? Number.NaN;
    ratios[`overload (${clients}): readiness probe p99 on PROBE_PORT (ms)`] =
      r.probes_probe_port?.p99_ms ?? Number.NaN;
    ratios[`overload (${clients}): answers other than 200/429`] = Object.entries(r.by_status)
      .filter(([status]) => status !== "200" && status !== "429")
      .reduce((n, [, v]) => n + v.count, 0);
  }
  for (const [clients, r] of Object.entries(floor))
    ratios[`overload floor (${clients}): refuse-all server's 429 p99 (ms)`] =
      r.by_status["429"]?.p99_ms ?? Number.NaN;
  for (const m of MODELS)
    ratios[`${m}: batch32_rps / batch1_rps (seed exercise, adjacent rounds, median)`] =
      seed[m]?.adjacent?.batch32_over_batch1_median ?? Number.NaN;
  if (typeof peerRes !== "string") {
    ratios["mnist: ferry_c64_rps / peer_c64_rps"] = round(
      (mnist.c64?.rps ?? 0) / (peerRes.c64?.rps ?? 1),
      2,
    );
  }
  printTable(
    "ratios",
    Object.entries(ratios).map(([ratio, value]) => ({ ratio, value })),
  );
  console.log(`
Where the tail came from (found with --cpu-prof, nstat and per-thread CPU, not guessed):
- thousands of connects at once overflowed Node's default accept backlog (511): the kernel
  dropped SYNs and clients waited out retransmits (1, 3, 7, 15 s) before the API saw them; the
  API now listens with a backlog of 8,192 (capped by net.core.somaxconn);
- Hono's body limit touched the request's body stream, which made @hono/node-server build a
  web ReadableStream per request instead of reading the body directly: half the API's CPU per
  request, and V8's GC threads busy on the garbage; the limit now reads Content-Length;
- BullMQ's few dozen Redis commands per job (73 commands per request at one client) on the
  sync path, now a Redis Stream lane (one XADD per coalesced group);
- under the 3,000-client flood the API's event-loop turns outlast the 1 s Redis command
  timeout, whose timer ran before the poll phase that would have read the waiting reply: 503s
  for answers Redis had given (544 in one run), and for commands not even written yet (a
  1 s timer started at the enqueue); an expired timer now lets a poll phase run, and one that
  fired late because the process was busy gives the command that time again;
- mnist ships with its cache on, so its refusals came after the body parse, the hash and a
  Redis lookup; a cache that has rarely answered lately (unique inputs) is now skipped at the
  gate, and the refusal reads the body without parsing it;
- the API parsed every request that arrived in one event-loop turn in that turn: under the
  flood turns of hundreds of ms, and a refusal, an answer or a readiness probe waited unread
  behind them (429 p50 ~450 ms, probes up to 0.8 s, honouring Retry-After); past 10 ms of
  parsing a turn, admitted requests now wait in the process (TurnShare), where admission
  counts them, and every turn reads the sockets again;
- at 64 clients, what p99 adds to p50 comes in stalls of the whole pipeline (every request in
  flight slow at once, 40-80 ms, a few times in a run; a bare node:http server's slow requests
  are spread instead), many at the same moments as 8-20 ms GC pauses of the API or the worker
  (--trace-gc against the stalls); the heap profiler (objects collected by major GCs) showed
  most of what the API's scavenges promoted was sync-lane entries in flight, as strings: an
  entry is now one buffer, off the V8 heap (API CPU per request -16 to -26% side by side);
- much of what is left of the 429s' wait is the machine's: (f') is a server that does nothing
  but refuse, under the same flood (every connection's request is parsed in one turn, on the
  two cores the 3,000 clients share): the floor no admission policy goes under here;
- after the opening burst, the 429s wait out the API's event-loop turns: its closed loop of
  ~2,000 admitted clients keeps its one thread at ~100% of a core, and a turn handles all
  that arrived during the last (prom-client's loop-lag p99 60-280 ms above its 100 ms
  resolution, against a 429 p99 of ~230 ms); a fifth of that thread is scavenges (~16 a
  second of ~9 ms: objects of requests in flight for ~0.6 s outlive them). Shedding on that
  lag (a PIE-style controller, scratch) refused 3x more and served a third fewer, and its
  429s, made in the slowest turns, came no sooner.`);
  return {
    raw,
    ferry: ferryRes,
    in_process_server: inProc,
    paired_rounds: paired,
    peer: peerRes,
    seed_exercise: seed,
    formed_batches: formed,
    overload: over,
    overload_floor: floor,
    ratios,
  };
}

/** Runs `f` over `items` one at a time (one stack up at a time: idle stacks are noise). */
async function seq<T, R>(items: readonly T[], f: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const item of items) out.push(await f(item));
  return out;
}
