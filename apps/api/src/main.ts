import type { ServerResponse } from "node:http";
import { ModelRepository } from "@ferry/model-repository";
import {
  configured,
  exitForConfig,
  exitWithParent,
  messageOf,
  queueName,
  survivesLostTerminal,
  tellParentListening,
} from "@ferry/protocol";
import { logDestination, startTracing } from "@ferry/telemetry";
import { FORGET_WITHIN_MS, InferenceClient } from "@ferry/transport";
import { pino } from "pino";
import { AdminService, HealthService } from "./admin/admin-service.js";
import { BatchJobReader } from "./batches/batch-job-reader.js";
import { BatchJobService } from "./batches/batch-job-service.js";
import { OpenAiBatchRunner } from "./batches/openai-batch-runner.js";
import { OpenAiBatchService } from "./batches/openai-batch-service.js";
import { loadEnv } from "./env.js";
import { FileService } from "./files/file-service.js";
import { createProbeServer } from "./health/probe-server.js";
import { StreamSlots } from "./http/stream-slots.js";
import { createHttpServer } from "./http-server.js";
import { classify } from "./inference/classify.js";
import { InferenceService } from "./inference/inference-service.js";
import { PackedPredictions } from "./inference/packed-predictions.js";
import { predictBatchLines } from "./inference/predict-batch-lines.js";
import { predictJobKind } from "./inference/predict-job-kind.js";
import { TrafficRouter } from "./inference/traffic-router.js";
import { JobService } from "./jobs/job-service.js";
import { V2InferService } from "./kserve-v2/v2-infer-service.js";
import { v2JobKind } from "./kserve-v2/v2-job-kind.js";
import { ApiMetrics } from "./metrics.js";
import { InFlight } from "./middleware/in-flight.js";
import {
  chatBatchLines,
  completionBatchLines,
  embeddingsBatchLines,
  responsesBatchLines,
} from "./openai/batch-line-kinds.js";
import { completionJobKind } from "./openai/completion-job-kind.js";
import { CompletionService } from "./openai/completion-service.js";
import { EmbeddingsService } from "./openai/embeddings-service.js";
import { ResponsesService } from "./openai/responses-service.js";
import { TokenizationService } from "./openai/tokenization-service.js";
import { InteractiveLoad } from "./parsing/interactive-load.js";
import { ParseThread } from "./parsing/parse-thread.js";
import type { Services } from "./services.js";

// a configuration that cannot work ends the process with one line saying what to change
const env = configured(loadEnv);
const log = pino({ level: env.LOG_LEVEL, base: { process: "api" } }, logDestination());
// before anything makes a span: off unless the OTEL_* variables name an exporter
const tracing = startTracing("ferry-api", { warn: (message) => log.warn(message) });
// a terminal closed under `npm start` must not end the drain it began (SIGHUP)
survivesLostTerminal();
// watched before the first await: a parent (`npm start`) that dies while this process still
// waits for Redis takes it along; once it serves, it drains first
let parentGone: () => void = () => process.exit(1);
exitWithParent(() => parentGone());
const repository = await ModelRepository.open(env.MODEL_REPOSITORY).catch((err: unknown) =>
  exitForConfig(
    `cannot read the model repository (MODEL_REPOSITORY=${env.MODEL_REPOSITORY}): ${messageOf(err)}`,
  ),
);
const client = new InferenceClient({
  redisUrl: env.REDIS_URL,
  clusterNodes: env.REDIS_CLUSTER_NODES,
  acceptReplicas: { replicas: env.ACCEPT_REPLICAS, timeoutMs: env.ACCEPT_REPLICAS_TIMEOUT_MS },
  prefix: env.FERRY_PREFIX,
  jobTtlS: env.JOB_TTL_S,
  idempotencyTtlS: env.IDEMPOTENCY_TTL_S,
  queueWaitBudgetMs: env.QUEUE_WAIT_BUDGET_MS,
  batchQueueShare: env.BATCH_QUEUE_SHARE,
  keyQueueShare: env.KEY_QUEUE_SHARE,
});
await client.ready();
// A reload the workers accepted (announced with the model's new generation, by whichever
// replica ran it): re-read that model so that every replica sees the versions the workers
// serve. Not on the reload request itself: the workers may still refuse the new files.
client.state.onConfigChange((message) => {
  if (message.type !== "generation") return;
  void repository
    .rereadModel(message.model)
    .then((entry) => {
      repository.adoptModel(entry);
      services.refreshQueueBoard?.();
    })
    .catch((err: unknown) => log.error({ err }, "repository reload failed"));
});
// every model's generation known from the start: one reloaded while this replica's
// subscription was down is then noticed when it comes back, requested here before or not
await client.state
  .watchGenerations(repository.list().map((m) => m.config.name))
  .catch((err: unknown) => log.warn({ err }, "model generations not read at start"));
const metrics = new ApiMetrics();
metrics.watchQueues(async () => {
  const depths: Record<string, number> = {};
  for (const entry of repository.list()) {
    for (const version of entry.versions) {
      const name = queueName(entry.config.name, version);
      depths[name] = await client.depth.waiting(name);
    }
  }
  return depths;
});
const router = new TrafficRouter(client.state);
const inference = new InferenceService(repository, client, metrics, router);
const completions = new CompletionService(repository, client, metrics, router, env.SYNC_JOB_TTL_S);
// embeddings run on the classifier path; v2 infer sends an embedder's texts to them
const embeddings = new EmbeddingsService(repository, inference);
const v2 = new V2InferService(inference, embeddings);
// each protocol's body in a job, tried in this order (the protocols meet here, not in jobs/)
const jobs = new JobService(client, [
  completionJobKind(completions),
  predictJobKind(inference),
  v2JobKind(v2, inference),
]);
const responses = new ResponsesService(completions, jobs);
// uploads' lines (NDJSON batches, batch input files) are parsed off the API's loop, each
// piece after the interactive requests in flight (for a while)
const interactive = new InteractiveLoad();
const parseThread = new ParseThread(env.MAX_BODY_BYTES, env.PARSE_THREAD_NICE, interactive.shared);
const files = new FileService(
  client,
  {
    maxBytes: env.MAX_FILE_BYTES,
    maxLines: env.MAX_FILE_LINES,
    maxLineBytes: env.MAX_BODY_BYTES,
  },
  { maxBytes: env.FILE_STORAGE_PER_KEY_BYTES, maxItems: env.FILES_PER_KEY },
  (bytes, firstLine) => parseThread.inputLines(bytes, firstLine),
);
// each protocol's batch lines, run by its own service (the protocols meet here, not in batches/)
new OpenAiBatchRunner(
  client,
  [
    chatBatchLines(completions),
    completionBatchLines(completions),
    responsesBatchLines(responses),
    embeddingsBatchLines(embeddings),
    predictBatchLines(inference, new PackedPredictions(inference, client)),
  ],
  env.JOB_TTL_S,
  log,
  env.BATCHES_RUNNING_PER_KEY,
  {
    storage: { maxBytes: env.FILE_STORAGE_PER_KEY_BYTES, maxItems: env.FILES_PER_KEY },
    renderAnswers: (plan) => parseThread.answers(plan),
  },
).start();
let draining = false;
/** How long a draining API still reads the requests already on their way to it, in ms. */
const LISTEN_GRACE_MS = 1_000;
const streams = new StreamSlots(env.MAX_STREAMS, env.MAX_STREAMS_PER_KEY);
const drain = new AbortController();
const services: Services = {
  env,
  admin: new AdminService(repository, client, log, metrics, router),
  health: new HealthService(repository, client, () => draining),
  log,
  repository,
  client,
  inference,
  v2,
  jobs,
  responses,
  completions,
  embeddings,
  tokenization: new TokenizationService(repository, completions, embeddings),
  batchJobs: new BatchJobService(repository, client, parseThread, env.BATCH_ROWS_PER_KEY_BYTES),
  batchJobReader: new BatchJobReader(repository, client, classify, (bytes) =>
    parseThread.resultLines(bytes),
  ),
  files,
  openAiBatches: new OpenAiBatchService(client, files, env.JOB_TTL_S),
  metrics,
  streams,
  draining: () => draining,
  drainSignal: drain.signal,
  tracing: tracing.enabled,
};
/** Connections the kernel may hold for this process before it accepts them. */
const LISTEN_BACKLOG = 8_192;

const inFlight = new InFlight();
const { server, handle } = createHttpServer(services, inFlight, interactive);
// Longer than any Retry-After this API gives and than a balancer's idle timeout (60 s on
// most): Node's 5 s default closes a keep-alive connection while its client waits to retry,
// and a request sent as it closes fails outright.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
/** A listen error as a configuration error that names the variable to change. */
const onListenError =
  (port: number, variable: string) =>
  (err: NodeJS.ErrnoException): void => {
    if (err.code === "EADDRINUSE")
      exitForConfig(
        `${env.HOST}:${port} is already in use: stop what listens there, or set ${variable} to a free port`,
      );
    if (err.code === "EACCES" || err.code === "EADDRNOTAVAIL")
      exitForConfig(`cannot listen on ${env.HOST}:${port} (${err.code}): set HOST and ${variable}`);
    throw err;
  };
server.once("error", onListenError(env.PORT, "PORT"));
// Node's default accept backlog (511) overflows when thousands of clients connect at once:
// the kernel drops their SYNs, and they wait out retransmits of 1, 3, 7, 15 s before this
// process ever sees them, refusal or not. The kernel caps it at net.core.somaxconn.
server.listen({ port: env.PORT, host: env.HOST, backlog: LISTEN_BACKLOG }, () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : env.PORT;
  log.info(
    { url: `http://${env.HOST}:${port}`, models: repository.list().map((m) => m.config.name) },
    "api listening",
  );
  tellParentListening(port);
});
// Left open while draining: readiness answers 503 there until the process exits.
if (env.PROBE_PORT !== undefined) {
  const probes = createProbeServer(handle);
  probes.once("error", onListenError(env.PROBE_PORT, "PROBE_PORT"));
  probes.listen({ port: env.PROBE_PORT, host: env.HOST }, () =>
    log.info({ url: `http://${env.HOST}:${env.PROBE_PORT}` }, "probe port listening"),
  );
}

/** How long a drain gives `store: false` responses' forgets: each waits on its worker this long. */
const FORGET_WAIT_MS = FORGET_WITHIN_MS + 1_000;

async function shutdown(signal: string): Promise<void> {
  if (draining) return;
  draining = true;
  drain.abort();
  // batches running here go to another replica now, not after the drain
  void client.openAiBatchRuns.close();
  log.info(
    { signal, open: inFlight.size, streams: streams.open },
    "draining: no new connections, finishing open requests",
  );
  const until = Date.now() + env.DRAIN_TIMEOUT_MS;
  if (signal !== "parent gone") {
    // A request already sent on a connection this process accepted but has not read yet (a
    // busy loop reads it late) counts as idle to Node, and closing the idle connections
    // resets it: the client sees "fetch failed", not an answer. Read what arrives a moment
    // longer, within the drain's time (readiness already says 503), each answer closing
    // its connection.
    server.prependListener("request", (_req, res: ServerResponse) => {
      res.shouldKeepAlive = false;
    });
    const grace = Math.min(LISTEN_GRACE_MS, env.DRAIN_TIMEOUT_MS);
    await new Promise((resolve) => setTimeout(resolve, grace));
  }
  server.close();
  server.closeIdleConnections();
  // Open streams (completions included: their requests returned when their stream began) run
  // to their end within the drain timeout; what is still open then is ended with where to
  // resume, and the jobs behind them go on in the workers.
  const left = Math.max(0, until - Date.now());
  await Promise.all([inFlight.settled(left), streams.settled(left)]);
  if (streams.open > 0) log.warn({ open: streams.open }, "drain timeout: ending open streams");
  await streams.closeAll(Math.max(1_000, until - Date.now()));
  // a stream ended before its first token still answers (a 503 saying where the job went):
  // an exit here had cut the answer off
  await inFlight.settled(Math.max(1_000, until - Date.now()));
  // and the `store: false` responses those streams carried are forgotten, each within its
  // wait for the job's worker to let go, or what the job wrote would stay its time
  await responses.forgotten(Math.max(FORGET_WAIT_MS, until - Date.now()));
  await client.close();
  await tracing.shutdown();
  log.info("api stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
// `npm start` killed with -9: this process drains as on SIGTERM, briefly, and exits
parentGone = () => void shutdown("parent gone");
