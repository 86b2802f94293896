import { ModelRepository } from "@ferry/model-repository";
import { queueName } from "@ferry/protocol";
import { WorkerTransport } from "@ferry/transport";
import { pino } from "pino";
import { ClassifierServer } from "./classifier-server.js";
import { loadEnv } from "./env.js";
import { GeneratorServer } from "./generation/generator-server.js";
import { startHealthServer } from "./health-server.js";
import { WorkerMetrics } from "./metrics.js";

const env = loadEnv();
const log = pino({ level: env.LOG_LEVEL, base: { process: "worker" } });
const metrics = new WorkerMetrics();
const repository = await ModelRepository.open(env.MODEL_REPOSITORY);
const wanted = env.WORKER_MODELS.split(",")
  .map((s) => s.trim())
  .filter(Boolean);
for (const name of wanted) repository.get(name); // fail at start on a typo, not silently
const transport = new WorkerTransport({
  redisUrl: env.REDIS_URL,
  prefix: env.FERRY_PREFIX,
  ...(env.WORKER_ID ? { workerId: env.WORKER_ID } : {}),
});

const servers: Array<{ close(): Promise<void> }> = [];
const lockOptions = {
  lockDurationMs: env.LOCK_DURATION_MS,
  stalledIntervalMs: env.STALLED_INTERVAL_MS,
};
for (const entry of repository.list()) {
  const name = entry.config.name;
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  if (entry.config.kind === "generator") {
    for (const version of entry.versions) {
      const server = await GeneratorServer.load(
        entry.config,
        version,
        entry.dir,
        env.EXECUTION_PROVIDER,
        metrics,
      );
      servers.push(server);
      // One job per seat: a completion waits in BullMQ, not here, so any worker with a free
      // seat can take it.
      transport.consumeGenerate(
        queueName(name, version),
        { concurrency: server.maxNumSeqs, ...lockOptions },
        (job, ctx) => server.handle(job, ctx.signal, ctx.emit),
      );
      log.info({ model: name, version, seats: server.maxNumSeqs }, "serving");
    }
    continue;
  }
  for (const version of entry.versions) {
    const server = await ClassifierServer.load(
      entry.config,
      version,
      repository.onnxPath(name, version),
      env.EXECUTION_PROVIDER,
      metrics,
    );
    servers.push(server);
    // Enough jobs in flight to fill every instance's batch while the previous one computes.
    const concurrency = entry.config.max_batch_size * entry.config.instance_count * 2;
    transport.consume(queueName(name, version), { concurrency, ...lockOptions }, (row, _job, ctx) =>
      server.handle(row, ctx),
    );
    log.info({ model: name, version, instances: entry.config.instance_count }, "serving");
  }
}
transport.startHeartbeat();
let draining = false;
const health =
  env.WORKER_PORT > 0 ? startHealthServer(env.WORKER_PORT, metrics, () => !draining) : undefined;
log.info(
  { worker: transport.workerId, models: servers.length, provider: env.EXECUTION_PROVIDER },
  "worker ready",
);

async function shutdown(signal: string): Promise<void> {
  if (draining) return;
  draining = true;
  log.info({ signal }, "draining: finishing running jobs, taking no new ones");
  await transport.close();
  await Promise.allSettled(servers.map((s) => s.close()));
  health?.close();
  log.info("worker stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
