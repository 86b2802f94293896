import { randomUUID } from "node:crypto";
import { queueName, type RowResult } from "@ferry/protocol";
import { Queue } from "bullmq";
import { ChannelMux } from "../shared/channel-mux.js";
import { createFastFailRedis, createRedis, type RedisClient } from "../shared/connection.js";
import { ControlChannel } from "../shared/control-channel.js";
import type { AcceptReplicas } from "../shared/durable-accept.js";
import { EventWriter } from "../shared/event-log.js";
import { BATCH_RUNS_QUEUE, bullQueueName, Keys } from "../shared/keys.js";
import { LogCloser } from "../shared/log-closer.js";
import { StorageQuota } from "../shared/storage-quota.js";
import { WorkerRegistry } from "../shared/worker-registry.js";
import { ActivityReader } from "./activity-reader.js";
import { BatchJobStore } from "./batch-job-store.js";
import { BatchResults } from "./batch-results.js";
import { EventReader } from "./event-reader.js";
import { FileStore } from "./file-store.js";
import { IdempotencyStore } from "./idempotency-store.js";
import { JobAdmission } from "./job-admission.js";
import { JobClient } from "./job-client.js";
import { OpenAiBatchRuns } from "./openai-batch-runs.js";
import { OpenAiBatchStore } from "./openai-batch-store.js";
import { OwnerShare } from "./owner-share.js";
import { PredictionCache } from "./prediction-cache.js";
import { queueBoardAdapters } from "./queue-board.js";
import { QueueCounts } from "./queue-counts.js";
import { QueueDepth } from "./queue-depth.js";
import { ReplyRouter } from "./reply-router.js";
import { RunningBatches } from "./running-batches.js";
import { ServingState } from "./serving-state.js";
import { ServingStats } from "./serving-stats.js";
import { SyncLaneProducer } from "./sync-lane-producer.js";
import { type InferRequest, type LookedUp, type RowCache, SyncRows } from "./sync-rows.js";

export interface InferenceClientOptions {
  redisUrl: string;
  /** Seed nodes ("host:port") of a Redis Cluster; when given, `redisUrl` only lends credentials. */
  clusterNodes?: readonly string[] | undefined;
  /** Key prefix shared by the API and its workers. @defaultValue "ferry" */
  prefix?: string;
  /** How long finished async jobs stay pollable, in seconds. @defaultValue 86_400 */
  jobTtlS?: number;
  /** How long an Idempotency-Key's answer is replayed, in seconds. @defaultValue 86_400 */
  idempotencyTtlS?: number;
  /**
   * Longest a sync row may expect to wait in its queue (depth over the measured service
   * rate), in ms; past it the row is refused with 429 at once. @defaultValue 5_000
   */
  queueWaitBudgetMs?: number;
  /**
   * The share of a queue's `max_queue_size` that jobs of the lowest priority band (batch
   * lines) may fill; the rest is kept for interactive requests. @defaultValue 0.5
   */
  batchQueueShare?: number;
  /**
   * The share of a queue's `max_queue_size` one tenant's waiting jobs may hold, for jobs
   * queued `shared` (a tenant among several); 1 holds none. @defaultValue 1
   */
  keyQueueShare?: number;
  /**
   * Replicas that must hold an async job before it is accepted (WAIT after the accepting
   * write), and how long to wait for them. @defaultValue { replicas: 0, timeoutMs: 500 }
   */
  acceptReplicas?: AcceptReplicas;
  /**
   * How long the end of a log whose job the API removed (cancelled, expired) is sent again
   * when Redis fails it, in ms; past it the cancel or expiry fails, and the sweep of removals
   * ends the log later. @defaultValue 10_000
   */
  closeRetryMs?: number;
}

/** How often async jobs past their deadline are looked for, in ms. */
const DEADLINE_SWEEP_MS = 250;
/**
 * How often removed jobs whose logs their remover left without an end, and reloads an API left
 * unfinished (committed, the generation not moved), are looked for, in ms.
 */
const REMOVAL_SWEEP_MS = 5_000;
/**
 * How long the end of a removed job's log is sent again while Redis refuses it, by default, in
 * ms; JobClient's sweep of removals waits well past it (a minute) before ending a log itself.
 */
const CLOSE_RETRY_MS = 10_000;

/**
 * The API's side of the transport: sends sync rows to the workers through the sync lane and
 * async work through BullMQ, and receives the answers over Redis pub/sub. Nothing else in the
 * API talks to Redis.
 */
export class InferenceClient {
  readonly keys: Keys;
  readonly instanceId = randomUUID();
  readonly workers: WorkerRegistry;
  /** Async jobs: submit, poll, follow, cancel. */
  readonly jobs: JobClient;
  /** Traffic splits, reload generations and reloads, shared by every replica. */
  readonly state: ServingState;
  /** Per-version request, cache and fallback counts, added to Redis once a second. */
  readonly stats: ServingStats;
  /** The last minutes of every version: time series and slowest requests (the dashboard's). */
  readonly activity: ActivityReader;
  readonly cache: PredictionCache;
  /** Broadcasts to every replica and worker: config changes, reloads, cancels. */
  readonly control: ControlChannel;
  /** Offline batch prediction: flows of chunk jobs, results stored by key. */
  readonly batches: BatchJobStore;
  /** Batches' answers and stored predictions, read. */
  readonly batchResults: BatchResults;
  /** Idempotency-Keys of the requests that create jobs and batches. */
  readonly idempotency: IdempotencyStore;
  /** Uploaded files and the files batches write (the Files API). */
  readonly files: FileStore;
  /** What each tenant keeps stored (its uploaded files), against its quota. */
  readonly storage: StorageQuota;
  /** Each owner's Ferry batches' rows still to run, against BATCH_ROWS_PER_KEY_BYTES. */
  readonly batchRows: StorageQuota;
  /** OpenAI-shaped batches (the Batch API) and the runner that takes them. */
  readonly openAiBatches: OpenAiBatchStore;
  /** Where OpenAI-shaped batches run: `process` on every API replica. */
  readonly openAiBatchRuns: OpenAiBatchRuns;
  /** Each tenant's OpenAI-shaped batches running now, held to a number per tenant. */
  readonly runningBatches: RunningBatches;
  private readonly redis: RedisClient;
  /**
   * The sync path's own connection (lane, cache): its commands never queue behind BullMQ's
   * on the shared one. Not auto-pipelined: the lane and the cache already send one command per
   * turn, and auto-pipelining held each for another turn (docs/benchmarks.md has the figures).
   */
  private readonly syncConnection: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly queues = new Map<string, Queue>();
  private readonly mux: ChannelMux;
  /** Sync rows: sent through the sync lane, answered over this replica's reply channel. */
  private readonly rows: SyncRows;
  /** Admission, and the queue lengths the queue-depth gauge exports. */
  readonly depth: QueueDepth;
  private readonly jobTtlS: number;
  private sweeping: NodeJS.Timeout | undefined;
  private sweepingRemovals: NodeJS.Timeout | undefined;

  constructor(options: InferenceClientOptions) {
    this.keys = new Keys(options.prefix ?? "ferry");
    this.jobTtlS = options.jobTtlS ?? 86_400;
    // While Redis is down or frozen a request fails in a moment (503), never hangs.
    const target = { url: options.redisUrl, clusterNodes: options.clusterNodes };
    this.redis = createFastFailRedis(target);
    this.subscriber = createRedis(target, { shardedSubscribers: true });
    this.syncConnection = createFastFailRedis(target);
    this.redis.on("error", () => {});
    this.syncConnection.on("error", () => {});
    this.subscriber.on("error", () => {});
    this.mux = new ChannelMux(this.subscriber);
    this.control = new ControlChannel(this.redis, this.mux, this.keys);
    this.state = new ServingState(this.redis, this.control, this.keys);
    this.stats = new ServingStats(this.redis, this.keys, {
      queues: () => this.depth.queues(),
      waitingNow: (queue) => this.depth.waitingNow(queue),
    });
    this.activity = new ActivityReader(this.redis, this.keys);
    this.cache = new PredictionCache(this.syncConnection, this.keys);
    const accept = options.acceptReplicas ?? { replicas: 0, timeoutMs: 500 };
    this.batches = new BatchJobStore(
      this.redis,
      this.keys,
      (name) => this.queue(name),
      this.jobTtlS,
      accept,
    );
    this.batchResults = new BatchResults(this.redis, this.keys, this.jobTtlS);
    const lane = new SyncLaneProducer(this.syncConnection, this.keys);
    this.depth = new QueueDepth(new QueueCounts((name) => this.queue(name), lane), {
      waitBudgetMs: options.queueWaitBudgetMs ?? 5_000,
      lowestBandShare: options.batchQueueShare ?? 0.5,
    });
    this.rows = new SyncRows(
      this.syncConnection,
      lane,
      new ReplyRouter(this.mux, this.keys.reply(this.instanceId), () => this.rows.resend()),
      this.depth,
      this.cache,
      this.instanceId,
    );
    this.workers = new WorkerRegistry(this.redis, this.keys);
    this.idempotency = new IdempotencyStore(
      this.redis,
      this.keys,
      options.idempotencyTtlS ?? 86_400,
    );
    this.files = new FileStore(this.redis, this.keys, this.jobTtlS);
    this.storage = new StorageQuota(this.redis, this.keys);
    this.batchRows = new StorageQuota(this.redis, this.keys, "batch-rows");
    this.openAiBatches = new OpenAiBatchStore(this.redis, this.keys, () =>
      this.queue(BATCH_RUNS_QUEUE),
    );
    this.openAiBatchRuns = new OpenAiBatchRuns(this.keys, target);
    this.runningBatches = new RunningBatches(this.redis, this.keys);
    this.jobs = new JobClient(
      this.redis,
      this.keys,
      (name) => this.queue(name),
      new JobAdmission(this.depth, {
        share: new OwnerShare(this.redis, this.keys, this.jobTtlS),
        of: options.keyQueueShare ?? 1,
      }),
      new EventWriter(this.redis, this.keys, this.jobTtlS),
      new LogCloser(this.redis, this.keys, this.jobTtlS, options.closeRetryMs ?? CLOSE_RETRY_MS),
      new EventReader(this.redis, this.mux, this.keys),
      this.control,
      this.jobTtlS,
      accept,
    );
  }

  /** Resolves once the connections are up and the reply channel is subscribed. */
  async ready(): Promise<void> {
    for (const redis of [this.redis, this.syncConnection])
      if (redis.status !== "ready")
        await new Promise<void>((resolve) => redis.once("ready", () => resolve()));
    await this.rows.ready();
    await this.state.start();
    this.stats.start();
    this.sweeping = sweepEvery(DEADLINE_SWEEP_MS, this.redis, () =>
      this.jobs.removal.sweepDeadlines(),
    );
    this.sweepingRemovals = sweepEvery(REMOVAL_SWEEP_MS, this.redis, () =>
      Promise.all([this.jobs.removal.sweepRemovals(), this.state.finishInterruptedReloads()]),
    );
  }

  /**
   * Redis answers, and the sync path's own connection is up too: each connection reconnects
   * on its own backoff (up to 2 s apart), and a replica that answered its readiness probe on
   * one while the other still waited refused the sync predicts sent to it (503).
   */
  async ping(): Promise<boolean> {
    if (this.syncConnection.status !== "ready") return false;
    try {
      return (await this.redis.ping()) === "PONG";
    } catch {
      return false;
    }
  }

  /**
   * Refuses (QUEUE_FULL) a request the queue of `model` at `version` cannot take within
   * `deadline`, from what this process knows: no Redis round trip (with `refuse: false` it is
   * only counted). An admitted request holds a place in the queue's depth until `release`
   * (when its rows enter, or it ends): a burst admitted in one turn counts itself, before
   * any body is parsed.
   */
  admit(
    model: string,
    version: string,
    maxQueueSize: number,
    deadline: number,
    { refuse = true }: { refuse?: boolean } = {},
  ): () => void {
    const name = queueName(model, version);
    if (refuse) this.depth.admitRow(name, maxQueueSize, deadline);
    this.depth.enter(name);
    let held = true;
    return () => {
      if (held) this.depth.leave(name);
      held = false;
    };
  }

  /** Runs one row through the model and waits for its answer (coalesced with its neighbours). */
  infer(req: InferRequest): Promise<RowResult> {
    return this.rows.infer(req);
  }

  /** One row's stored answer when the prediction cache holds a fresh one, else the model's. */
  inferOrLookUp<T>(req: InferRequest, cache: RowCache): Promise<LookedUp<T>> {
    return this.rows.inferOrLookUp<T>(req, cache);
  }

  /** bull-board adapters over these queues (model-version queue names). */
  queueBoard(names: readonly string[]): ReturnType<typeof queueBoardAdapters> {
    return queueBoardAdapters((name) => this.queue(name), names);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeping);
    clearInterval(this.sweepingRemovals);
    this.stats.stop();
    // batches running here go back to the queue first, for another replica to take over
    await this.openAiBatchRuns.close();
    await this.batches.close().catch(() => undefined);
    await this.stats.flush().catch(() => undefined);
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    this.subscriber.disconnect();
    await Promise.all([
      this.redis.quit().catch(() => undefined),
      this.syncConnection.quit().catch(() => undefined),
    ]);
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(bullQueueName(name), { connection: this.redis, prefix: this.keys.prefix });
      queue.on("error", () => {});
      this.queues.set(name, queue);
    }
    return queue;
  }
}

/**
 * Runs `sweep` every `ms` while `redis` is up, one at a time: a sweep whose log ends Redis
 * refuses takes the closer's retries, and the next waits for it rather than piling up.
 */
function sweepEvery(ms: number, redis: RedisClient, sweep: () => Promise<unknown>): NodeJS.Timeout {
  let running = false;
  const timer = setInterval(() => {
    if (running || redis.status !== "ready") return;
    running = true;
    void sweep()
      .catch(() => undefined)
      .finally(() => {
        running = false;
      });
  }, ms);
  timer.unref();
  return timer;
}
