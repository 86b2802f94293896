import {
  configured,
  exitForConfig,
  exitWithParent,
  messageOf,
  survivesLostTerminal,
} from "@ferry/protocol";
import { logDestination, startTracing } from "@ferry/telemetry";
import { WorkerTransport } from "@ferry/transport";
import { pino } from "pino";
import { loadEnv } from "./env.js";
import { startHealthServer } from "./health-server.js";
import { WorkerMetrics } from "./metrics.js";
import { ModelHost } from "./model-host.js";

// a configuration that cannot work ends the process with one line saying what to change
const env = configured(loadEnv);
const log = pino({ level: env.LOG_LEVEL, base: { process: "worker" } }, logDestination());
// before anything makes a span: off unless the OTEL_* variables name an exporter
const tracing = startTracing("ferry-worker", { warn: (message) => log.warn(message) });
// a terminal closed under `npm start` must not end the drain it began (SIGHUP)
survivesLostTerminal();
const metrics = new WorkerMetrics();
const transport = new WorkerTransport({
  redisUrl: env.REDIS_URL,
  clusterNodes: env.REDIS_CLUSTER_NODES,
  prefix: env.FERRY_PREFIX,
  jobTtlS: env.JOB_TTL_S,
  ...(env.WORKER_ID ? { workerId: env.WORKER_ID } : {}),
});
// a queue is advertised the moment its model serves: `/health` and the readiness of each model
// follow the load, model by model, not the heartbeat after the last one
const advertise = (): Promise<void> => transport.beatNow(host.servedQueues).catch(() => undefined);
const host = new ModelHost(transport, metrics, log, {
  repositoryRoot: env.MODEL_REPOSITORY,
  models: env.WORKER_MODELS.split(",")
    .map((s) => s.trim())
    .filter(Boolean),
  executionProvider: env.EXECUTION_PROVIDER,
  lockDurationMs: env.LOCK_DURATION_MS,
  stalledIntervalMs: env.STALLED_INTERVAL_MS,
  onServing: advertise,
});
let draining = false;
/** How long a start that failed gives what its loaded models took before it exits, in ms. */
const CLOSE_ON_FAILED_START_MS = 10_000;
/** Set once every model of this worker serves: its readiness. */
let loaded = false;
// The port before anything else: a worker that cannot have it exits before it joins the
// worker list or takes a job (it had said "worker ready" with its queues, then exited).
// Listening while the models load, its liveness answers then and its readiness says not yet.
const health =
  env.WORKER_PORT > 0
    ? await startHealthServer(env.WORKER_PORT, metrics, () => loaded && !draining)
    : undefined;
// Before the models load: a model serves (takes jobs) as soon as it has loaded, so a signal
// during the rest of the load must drain what it took, not kill the process holding it.
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
// `npm start` killed with -9: this process drains as on SIGTERM, briefly, and exits
exitWithParent(() => void shutdown("parent gone"));

// This worker answers reloads from its first heartbeat on: the API waits for every live
// worker's answer, and the host runs a reload after its start's loads, on the files as they
// are then (a reload's new files are never missed by a worker that was still starting).
transport.onReload({
  reload: (model) => host.reload(model),
  prepare: (model, id) => host.prepare(model, id),
  decide: (id, commit) => host.decide(id, commit),
});
transport.startHeartbeat();
// models that do not load (a repository it cannot read, a name WORKER_MODELS gets wrong, a
// broken file, an execution provider this machine lacks) would not load when restarted either
const started = host.start().catch(async (err: unknown) => {
  // the models loaded before the one that failed served: what they took is answered, and the
  // worker leaves the list it joined at its first heartbeat (a drain that cannot end is cut)
  draining = true;
  await Promise.race([
    drain(),
    new Promise((resolve) => setTimeout(resolve, CLOSE_ON_FAILED_START_MS)),
  ]).catch(() => undefined);
  exitForConfig(
    `the worker cannot serve its models (MODEL_REPOSITORY=${env.MODEL_REPOSITORY}, WORKER_MODELS=${env.WORKER_MODELS || "all"}): ${messageOf(err)}`,
  );
});
await started;
if (!draining) {
  loaded = true;
  log.info(
    { worker: transport.workerId, queues: host.servedQueues, provider: env.EXECUTION_PROVIDER },
    "worker ready",
  );
}

async function shutdown(signal: string): Promise<void> {
  if (draining) return;
  draining = true;
  log.info({ signal }, "draining: finishing running jobs, taking no new ones");
  // a drain that cannot end (Redis gone: no job's end can be written) must not hold the
  // process for good; the jobs it leaves are taken by another worker once their locks lapse
  setTimeout(() => {
    log.warn(
      { drainTimeoutMs: env.DRAIN_TIMEOUT_MS },
      "drain timed out: jobs still running here are left to another worker",
    );
    process.exit(1);
  }, env.DRAIN_TIMEOUT_MS).unref();
  // during the start: the model loading now is the last, then the drain
  host.stopLoading();
  await started;
  await drain();
  await tracing.shutdown();
  log.info("worker stopped");
  process.exit(0);
}

/** Takes no new jobs, finishes the ones taken, leaves the worker list, closes the models. */
async function drain(): Promise<void> {
  await transport.close();
  await host.close();
  health?.close();
}
