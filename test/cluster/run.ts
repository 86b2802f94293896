// `npm run test:cluster`: Ferry across hosts, with hosts that fail. Redis, the API, the
// workers and the load client each run on a host of their own (a network namespace with its
// own address, joined by a virtual switch). Under steady load of async jobs and streaming
// completions, in this order: (a) every process of worker host 1 is SIGKILLed mid-batch,
// (c) a third worker host joins, (b) worker host 2's link is cut for longer than the lock
// duration, then restored (so that a live worker is there to take its jobs over). Every
// accepted request must complete exactly once, with the right answer.
// Needs root and iproute2; creates, and deletes, only its own namespaces.
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { tempRepository } from "../helpers/model-repo.js";
import { LoadClientLink } from "./load-client-link.js";
import { type Host, VirtualNetwork } from "./network.js";
import { recoveryAfter, summarize } from "./report.js";

/** Lock and stall check short enough for a short run; the cut outlasts the lock 2.5 times. */
const LOCK_MS = 4_000;
const STALLED_MS = 2_000;
const CUT_MS = 10_000;
const WORKER_PORT = 9100;
const API_PORT = 8000;

if (!VirtualNetwork.available()) {
  console.error("test:cluster needs root and iproute2 (`ip netns`); nothing was run");
  process.exit(1);
}

const net = new VirtualNetwork(`fy${randomBytes(2).toString("hex")}`, "10.254.0");
const repo = tempRepository({ digits: { cache: { enabled: false } }, "tiny-lm": {} });
const children: ChildProcess[] = [];
const logs = new Map<string, string[]>();
/** Rejects when the host's process exits: a readiness wait fails at once rather than time out. */
const exits = new Map<string, Promise<never>>();
let cleaned = false;
const cleanup = () => {
  if (cleaned) return;
  cleaned = true;
  for (const child of children) child.kill("SIGKILL");
  net.destroy();
  rmSync(repo, { recursive: true, force: true });
};
process.on("exit", cleanup);
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.on(signal, () => {
    cleanup();
    process.exit(130);
  });

/** What each host printed, less the load client's per-request lines. */
function dumpLogs(): void {
  for (const [name, log] of logs) {
    const text = log
      .join("")
      .split("\n")
      .filter((l) => !l.startsWith('{"ev"'))
      .join("\n")
      .slice(-3000);
    if (text.trim()) console.error(`--- ${name}\n${text}`);
  }
}

const node = (entry: string) => ["--conditions=ferry-source", "--import", "tsx", entry];

function start(host: Host, command: string, args: string[], env: Record<string, string> = {}) {
  const child = net.run(host, command, args, { ...process.env, LOG_LEVEL: "warn", ...env });
  const log: string[] = [];
  logs.set(host.name, log);
  child.stdout?.on("data", (d: Buffer) => log.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => log.push(d.toString()));
  children.push(child);
  exits.set(
    host.name,
    new Promise((_, reject) =>
      child.on("exit", (code, signal) =>
        reject(new Error(`${host.name} exited (${code ?? signal}):\n${log.join("").slice(-3000)}`)),
      ),
    ),
  );
  exits.get(host.name)?.catch(() => undefined);
  return child;
}

net.create();
const redisHost = net.addHost("redis", 10);
const apiHost = net.addHost("api", 20);
const workerHosts = [net.addHost("w1", 31), net.addHost("w2", 32), net.addHost("w3", 33)];
const clientHost = net.addHost("client", 40);
const redisUrl = `redis://${redisHost.address}:6379`;
const common = { REDIS_URL: redisUrl, FERRY_PREFIX: "ferry", MODEL_REPOSITORY: repo };

start(redisHost, "redis-server", [
  "--bind",
  redisHost.address,
  "--port",
  "6379",
  "--save",
  "",
  "--appendonly",
  "no",
  "--protected-mode",
  "no",
  "--maxmemory-policy",
  "noeviction",
]);
start(apiHost, process.execPath, node("apps/api/src/main.ts"), {
  ...common,
  HOST: "0.0.0.0",
  PORT: String(API_PORT),
});
const startWorker = (host: Host) =>
  start(host, process.execPath, node("apps/worker/src/main.ts"), {
    ...common,
    WORKER_MODELS: "digits,tiny-lm",
    WORKER_PORT: String(WORKER_PORT),
    WORKER_ID: host.name,
    LOCK_DURATION_MS: String(LOCK_MS),
    STALLED_INTERVAL_MS: String(STALLED_MS),
  });

// The load client: everything HTTP happens from its host, over the virtual network.
const apiUrl = `http://${apiHost.address}:${API_PORT}`;
const client = start(clientHost, process.execPath, node("test/cluster/load-client.ts"), {
  API_URL: apiUrl,
});
const link = new LoadClientLink(client);
const workerUrl = (host: Host, path: string) => `http://${host.address}:${WORKER_PORT}${path}`;
const ready = (url: string, host: Host) => link.ready(url, exits.get(host.name));
const workerMetric = (host: Host, name: string) => link.metric(workerUrl(host, "/metrics"), name);
/**
 * Waits until the worker is decoding streams, so that a fault lands mid-work: two, one of them
 * joining just now, if that comes within 5 s (streams seen running may all finish between this
 * read and the fault: it happened), else any, 10 s at most.
 */
async function busy(host: Host): Promise<number> {
  const started = Date.now();
  let running = await workerMetric(host, "ferry_worker_running_sequences");
  while (Date.now() - started < 10_000) {
    const before = running;
    running = await workerMetric(host, "ferry_worker_running_sequences");
    // at the moment a stream joins, its whole completion is ahead: a fault now catches it
    // mid-flight, where streams merely seen running may end before the fault lands
    if (running >= 2 && running > before) break;
    if (running >= 1 && Date.now() - started > 5_000) break;
  }
  return running;
}
/** Streams the hosts' workers resumed after another worker left them mid-completion. */
async function resumedOn(...hosts: Host[]): Promise<number> {
  let sum = 0;
  for (const host of hosts) sum += await workerMetric(host, "ferry_worker_resumed_sequences_total");
  return sum;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const [w1, w2, w3] = workerHosts as [Host, Host, Host];

try {
  const t0 = Date.now();
  await ready(`${apiUrl}/v2/health/ready`, apiHost);
  startWorker(w1);
  startWorker(w2);
  await ready(workerUrl(w1, "/health/ready"), w1);
  await ready(workerUrl(w2, "/health/ready"), w2);
  console.log(
    `cluster up in ${((Date.now() - t0) / 1000).toFixed(1)} s: redis ${redisHost.address}, api ${apiHost.address}, workers ${w1.address} ${w2.address}, client ${clientHost.address}`,
  );

  await link.start();
  const loadStart = Date.now();
  /**
   * `midFlight`: the fault must catch requests in flight that another worker then takes;
   * `resumed`: streams the surviving workers resumed meanwhile.
   */
  const faults: Array<{ name: string; at: number; midFlight: boolean; resumed?: number }> = [];
  await sleep(8_000);

  // (a) a worker host loses power mid-batch: wait until it is decoding some streams
  const w1Rows = await workerMetric(w1, "ferry_worker_rows_total");
  const resumedBeforeKill = await resumedOn(w2);
  const w1Running = await busy(w1);
  const killedAt = Date.now();
  const pids = net.killAll(w1);
  await sleep(10_000);
  faults.push({
    name: `(a) SIGKILL worker host w1 (${pids.length} processes, ${w1Running} streams decoding)`,
    at: killedAt,
    midFlight: true,
    resumed: (await resumedOn(w2)) - resumedBeforeKill,
  });

  // (c) a third worker host joins mid-run
  const joinAt = Date.now();
  startWorker(w3);
  await ready(workerUrl(w3, "/health/ready"), w3);
  faults.push({ name: "(c) worker host w3 joins", at: joinAt, midFlight: false });
  await sleep(6_000);

  // (b) worker host w2's link is cut for longer than the lock, then restored
  const resumedBeforeCut = await resumedOn(w2, w3);
  const w2Running = await busy(w2);
  const cutAt = Date.now();
  net.cut(w2);
  await sleep(CUT_MS);
  net.restore(w2);
  const w2TokensAtRestore = await workerMetric(w2, "ferry_worker_generated_tokens_total");
  await sleep(12_000);
  faults.push({
    name: `(b) link of w2 cut for ${CUT_MS / 1000} s (lock ${LOCK_MS / 1000} s, ${w2Running} streams decoding), restored`,
    at: cutAt,
    midFlight: true,
    resumed: (await resumedOn(w2, w3)) - resumedBeforeCut,
  });

  const w2Tokens = await workerMetric(w2, "ferry_worker_generated_tokens_total");
  const resumed =
    (await workerMetric(w2, "ferry_worker_resumed_sequences_total")) +
    (await workerMetric(w3, "ferry_worker_resumed_sequences_total"));
  const w3Rows = await workerMetric(w3, "ferry_worker_rows_total");
  const w3Tokens = await workerMetric(w3, "ferry_worker_generated_tokens_total");
  await link.stop();

  const done = link.done();
  const summary = summarize(done);
  console.log(
    `\nload ran ${((Date.now() - loadStart) / 1000).toFixed(0)} s from ${clientHost.address}: ${summary.table}`,
  );
  const recoveries = faults.map((f) => ({ ...f, ...recoveryAfter(done, f.at, LOCK_MS) }));
  for (const r of recoveries)
    console.log(
      `${r.name} at +${((r.at - loadStart) / 1000).toFixed(1)} s: ${r.text}${r.resumed === undefined ? "" : `; ${r.resumed} streams resumed elsewhere`}`,
    );
  console.log(`w3 after joining: ${w3Rows} classifier rows, ${w3Tokens} generated tokens`);
  console.log(`w2 after its link came back: ${w2Tokens - w2TokensAtRestore} generated tokens`);
  console.log(`streams resumed mid-completion by another worker: ${resumed}`);
  console.log(`completions per second: ${summary.timeline(loadStart)}`);

  const problems: string[] = [];
  const c = summary.counts;
  if (c.lost > 0) problems.push(`${c.lost} lost`);
  if (c.duplicated > 0) problems.push(`${c.duplicated} duplicated`);
  if (c.wrong > 0) problems.push(`${c.wrong} wrong answers`);
  if (c.completed < 50) problems.push(`only ${c.completed} completed`);
  if (!(w3Rows + w3Tokens > 0)) problems.push("the joining worker took no work");
  if (!(w2Tokens > w2TokensAtRestore)) problems.push("w2 took no work after its link came back");
  if (!(resumed > 0)) problems.push("no stream was resumed by another worker");
  for (const r of recoveries)
    if (r.recoveredMs === undefined) problems.push(`${r.name}: throughput never recovered`);
  // The kill and the cut each caught work mid-flight that another worker then took over:
  // streams it resumed, or requests answered only once the lock had lapsed. (A takeover can
  // also finish before a full lock period: the lock was last renewed up to half of one before.)
  for (const r of recoveries)
    if (r.midFlight && r.takenOver === 0 && !(Number(r.resumed) > 0))
      problems.push(`${r.name}: no request was caught mid-flight`);
  if (w1Rows === 0) problems.push("w1 took no classifier rows before it was killed");
  for (const d of done
    .filter((d) => d.outcome !== "completed" && d.outcome !== "rejected")
    .slice(0, 5))
    console.log("failed request:", JSON.stringify(d));
  if (problems.length > 0) {
    console.error(`\ncluster test FAILED: ${problems.join(", ")}`);
    dumpLogs();
    process.exitCode = 1;
  } else {
    console.log("\ncluster test passed: every accepted request completed exactly once");
  }
} catch (err) {
  console.error(err);
  dumpLogs();
  process.exitCode = 1;
} finally {
  cleanup();
}
