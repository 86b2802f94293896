import { hostname } from "node:os";
import {
  type BatchChunkJob,
  type CompletionResult,
  FerryError,
  type GenerateJob,
  type InferJob,
  type InferReply,
  parseQueueName,
  type ResultInLog,
  WIRE_VERSION,
} from "@ferry/protocol";
import { type Job, UnrecoverableError, Worker } from "bullmq";
import { ChannelMux } from "../shared/channel-mux.js";
import { createRedis, type RedisClient, type RedisTarget } from "../shared/connection.js";
import { ControlChannel } from "../shared/control-channel.js";
import { EventWriter } from "../shared/event-log.js";
import { formatFailure } from "../shared/job-records.js";
import { bullQueueName, Keys, queueOfBullName } from "../shared/keys.js";
import { HEARTBEAT_INTERVAL_MS, WorkerRegistry } from "../shared/worker-registry.js";
import { AsyncRowConsumer } from "./async-row-consumer.js";
import { BatchJobConsumer } from "./batch-job-consumer.js";
import { Custody } from "./custody.js";
import { ExecutionStats } from "./execution-stats.js";
import { expireFinished } from "./finished-jobs.js";
import { GenerationConsumer } from "./generation-consumer.js";
import type {
  ConsumeOptions,
  GenerateHandler,
  PackedHandler,
  ReloadHandler,
  RowHandler,
} from "./handlers.js";
import { InteractiveReserve } from "./interactive-reserve.js";
import { followReloads, type ReloadFollower } from "./reload-follower.js";
import { SyncLaneConsumer } from "./sync-lane-consumer.js";

export interface WorkerTransportOptions {
  redisUrl: string;
  /** Seed nodes ("host:port") of a Redis Cluster; when given, `redisUrl` only lends credentials. */
  clusterNodes?: readonly string[] | undefined;
  /** @defaultValue "ferry" */
  prefix?: string;
  /** @defaultValue `${hostname()}-${pid}` */
  workerId?: string;
  /** How long a job's event log is kept, in seconds. @defaultValue 86_400 */
  jobTtlS?: number;
  /**
   * How long a job's event append that failed is sent again, in ms (a failover takes a few
   * seconds): a log that lost its `done` would hold its readers forever. @defaultValue 30_000
   */
  eventRetryMs?: number;
}

/** A queue's lock settings, ConsumeOptions' defaults filled in. */
type Locking = Required<Pick<ConsumeOptions, "lockDurationMs" | "stalledIntervalMs">>;

function locking(options: ConsumeOptions): Locking {
  return {
    lockDurationMs: options.lockDurationMs ?? 10_000,
    stalledIntervalMs: options.stalledIntervalMs ?? 5_000,
  };
}

/**
 * A job whose workers keep dying fails after this many stalls: a backstop, since Custody fails
 * a poison job on its second return at most.
 */
const MAX_STALLED = 3;

/**
 * The worker's side of the transport: consumes model-version queues from BullMQ, hands each
 * row to a handler, and publishes the answers to the API process that waits for them.
 */
export class WorkerTransport {
  readonly keys: Keys;
  readonly workerId: string;
  private readonly redis: RedisClient;
  private readonly subscriber: RedisClient;
  /** Event-log appends: a connection of their own (see the constructor). */
  private readonly eventsRedis: RedisClient;
  private readonly events: EventWriter;
  private readonly registry: WorkerRegistry;
  private readonly generation: GenerationConsumer;
  private readonly asyncRows: AsyncRowConsumer;
  private readonly custody: Custody;
  private readonly jobTtlS: number;
  private readonly batches: BatchJobConsumer;
  private readonly control: ControlChannel;
  private readonly mux: ChannelMux;
  private readonly workers = new Map<string, Worker>();
  /** Workers of the batch control queues (not advertised: no request waits on them). */
  private readonly controls: Worker[] = [];
  private readonly reserves: InteractiveReserve[] = [];
  private readonly lanes: SyncLaneConsumer[] = [];
  private readonly target: RedisTarget;
  private readonly running = new Map<string, AbortController>();
  private heartbeat: NodeJS.Timeout | undefined;
  /** Told when a model's files are read and when it starts serving (set by `onReload`). */
  private follower: ReloadFollower | undefined;
  private readonly startedAt = Date.now();
  /** What this worker's executions cost, added to the deployment's statistics. */
  readonly stats: ExecutionStats;

  constructor(options: WorkerTransportOptions) {
    this.keys = new Keys(options.prefix ?? "ferry");
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}`;
    this.target = { url: options.redisUrl, clusterNodes: options.clusterNodes };
    this.redis = createRedis(this.target);
    // shard channels too (a generator queue's interactive-queued word): one subscriber a primary
    this.subscriber = createRedis(this.target, { shardedSubscribers: true });
    this.redis.on("error", () => {});
    this.subscriber.on("error", () => {});
    this.registry = new WorkerRegistry(this.redis, this.keys);
    this.jobTtlS = options.jobTtlS ?? 86_400;
    // Event appends and answers have a connection without BullMQ's scripts and commands. It
    // is not auto-pipelined: the writers already send once per turn, and ioredis'
    // auto-pipelining held each send for another turn of the event loop (a setImmediate), so
    // a one-client answer left after the worker's next read instead of before it.
    this.eventsRedis = createRedis(this.target);
    this.eventsRedis.on("error", () => {});
    const retryForMs = options.eventRetryMs ?? 30_000;
    this.events = new EventWriter(this.eventsRedis, this.keys, this.jobTtlS, { retryForMs });
    this.generation = new GenerationConsumer(
      this.eventsRedis,
      this.events,
      this.keys,
      this.running,
    );
    this.batches = new BatchJobConsumer(this.redis, this.keys, this.jobTtlS);
    this.asyncRows = new AsyncRowConsumer(
      this.redis,
      this.events,
      this.keys,
      this.running,
      this.workerId,
    );
    // a job that comes back from a worker that died running it alone is failed, not retried
    const self = { id: this.workerId, startedAt: this.startedAt };
    this.custody = new Custody(this.redis, this.keys, self, this.registry, this.jobTtlS, {
      pause: async () => {
        await Promise.all([...this.workers.values()].map((w) => w.pause(true)));
      },
      resume: () => {
        for (const worker of this.workers.values()) if (!worker.closing) worker.resume();
      },
    });
    this.stats = new ExecutionStats(this.redis, this.keys);
    this.mux = new ChannelMux(this.subscriber);
    this.control = new ControlChannel(this.redis, this.mux, this.keys);
    void this.control.onCancel((jobId) => this.running.get(jobId)?.abort()).catch(() => undefined);
    // a cancel broadcast while the subscription was down was missed; its mark was not
    this.control.onResubscribed(() => {
      for (const [id, controller] of this.running)
        void this.redis
          .exists(this.keys.cancelled(id))
          .then((marked) => marked === 1 && controller.abort())
          .catch(() => undefined);
    });
  }

  /**
   * Starts consuming `queue`: its sync lane (rows of waiting requests) and its BullMQ queue
   * (async jobs, batch chunks). Every row goes through `handler`.
   */
  consume(
    queue: string,
    options: ConsumeOptions,
    handler: RowHandler,
    /** The queue's offline batch chunks, packed; a model without it takes none. */
    packed?: PackedHandler,
  ): void {
    const lock = locking(options);
    const reader = createRedis(this.target);
    reader.on("error", () => {});
    const lane = new SyncLaneConsumer(
      reader,
      this.eventsRedis,
      this.keys,
      { name: queue, ...parseQueueName(queue) },
      this.workerId,
      {
        capacity: options.concurrency,
        ...lock,
        maxDeliveries: MAX_STALLED + 1,
      },
      handler,
    );
    lane.start();
    this.lanes.push(lane);
    this.register(
      queue,
      new Worker<InferJob | BatchChunkJob, InferReply | { stored: number }>(
        bullQueueName(queue),
        (job, token) => this.process(job, handler, packed, token, lock.lockDurationMs),
        this.workerOptions(options.concurrency, lock),
      ),
    );
    // the queue's offline batches: their parents and gates live beside it (one slot), under
    // the queue's own locks: a parent or gate a dead worker held waited out BullMQ's 30 s
    // defaults twice before its batch could complete
    const control = this.workerOptions(8, lock);
    for (const worker of this.batches.controlWorkers(queue, control)) {
      worker.on("error", () => {});
      expireFinished(worker, this.redis, this.jobTtlS);
      this.controls.push(worker);
    }
  }

  /**
   * Starts consuming a generator queue: each job is one completion, whose events (status,
   * tokens, result or error, done) go to the job's log as the handler emits them.
   */
  consumeGenerate(queue: string, options: ConsumeOptions, handler: GenerateHandler): void {
    const lock = locking(options);
    const process = (
      job: Job<GenerateJob, CompletionResult | ResultInLog>,
      token: string | undefined,
    ) =>
      this.custody.run(
        job,
        () => this.generation.process(job, handler, token, lock.lockDurationMs),
        (message) =>
          this.generation.refuse(
            job,
            token,
            lock.lockDurationMs,
            new FerryError("MODEL_ERROR", message),
          ),
        // a completion that had logged tokens was decoding, past taking its prompt in
        () =>
          this.events
            .history({ queue: queueOfBullName(job.queueName), id: job.id ?? "" })
            .then((log) => log.some((e) => e.type === "token")),
      );
    let inFlight = 0;
    const reserve =
      (options.interactiveReserve ?? 0) > 0
        ? new InteractiveReserve(bullQueueName(queue), {
            connection: this.redis,
            prefix: this.keys.prefix,
            slots: options.interactiveReserve ?? 0,
            ...(options.interactivePeekMs === undefined
              ? {}
              : { peekMs: options.interactivePeekMs }),
            lockDurationMs: lock.lockDurationMs,
            full: () => !worker.isPaused() && inFlight >= options.concurrency,
            process: (job, token) => process(job, token),
            jobTtlS: this.jobTtlS,
          })
        : undefined;
    const worker = new Worker<GenerateJob, CompletionResult | ResultInLog>(
      bullQueueName(queue),
      async (job, token) => {
        inFlight++;
        reserve?.changed();
        try {
          return await process(job, token);
        } finally {
          inFlight--;
          reserve?.changed();
        }
      },
      this.workerOptions(options.concurrency, lock),
    );
    this.register(queue, worker);
    if (reserve) {
      reserve.start();
      this.reserves.push(reserve);
      // an API says when it queued an interactive completion: looked for at once, not at the
      // reserve's next look
      void this.mux
        .listen(this.keys.interactiveQueued(queue), () => reserve.queued(), "shard")
        .catch(() => undefined);
    }
  }

  private workerOptions(concurrency: number, lock: Locking) {
    return {
      connection: this.redis,
      prefix: this.keys.prefix,
      concurrency,
      lockDuration: lock.lockDurationMs,
      stalledInterval: lock.stalledIntervalMs,
      maxStalledCount: MAX_STALLED,
    };
  }

  private register(queue: string, worker: Worker): void {
    worker.on("error", () => {});
    expireFinished(worker, this.redis, this.jobTtlS);
    this.workers.set(queue, worker);
    this.follower?.serving(parseQueueName(queue).model);
  }

  /**
   * Serves reload requests (POST /admin/models/{name}/reload reaches every worker) with
   * `handler`, and makes up the ones this worker did not hear (see `followReloads`).
   */
  onReload(handler: ReloadHandler): void {
    this.follower = followReloads(this.control, this.redis, this.keys, this.workerId, handler, () =>
      [...this.workers.keys()].map((queue) => parseQueueName(queue).model),
    );
  }

  /**
   * To be awaited before a model's files are read at the start: the reload generation they
   * are read at (see `followReloads`). Reloads read theirs themselves.
   */
  async loading(model: string): Promise<void> {
    await this.follower?.loading(model);
  }

  /** Re-advertises the served queues at once (after a reload added some). */
  async beatNow(queues: string[]): Promise<void> {
    await this.registry.beat({ id: this.workerId, queues, started_at: this.startedAt });
  }

  /** Advertises this worker and its queues until `close`, so the API knows who is alive. */
  startHeartbeat(): void {
    const beat = () =>
      void this.registry
        .beat({ id: this.workerId, queues: [...this.workers.keys()], started_at: this.startedAt })
        .catch(() => undefined);
    beat();
    this.heartbeat = setInterval(beat, HEARTBEAT_INTERVAL_MS);
    this.heartbeat.unref();
    this.stats.start();
  }

  /** Drains: no new jobs are taken, running ones finish and their answers go out. */
  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    await Promise.allSettled([
      ...this.lanes.map((lane) => lane.close()),
      ...[...this.workers.values(), ...this.controls, ...this.reserves].map((w) => w.close()),
    ]);
    await this.registry.remove(this.workerId).catch(() => undefined);
    await this.stats.close().catch(() => undefined);
    this.subscriber.disconnect();
    await this.events.flush().catch(() => undefined);
    await this.eventsRedis.quit().catch(() => undefined);
    await this.redis.quit().catch(() => undefined);
  }

  /** A model queue carries live rows (infer) and offline batch chunks (batch). */
  private async process(
    job: Job<InferJob | BatchChunkJob>,
    handler: RowHandler,
    packed: PackedHandler | undefined,
    token: string | undefined,
    lockDurationMs: number,
  ): Promise<InferReply | { stored: number }> {
    const data = job.data;
    if (data.kind === "batch")
      return this.custody.run(
        job,
        () =>
          this.batches.processChunk(data, packed, job.attemptsMade + 1 >= (job.opts.attempts ?? 1)),
        async (message) => {
          await this.batches.failChunk(data, message).catch(() => undefined);
          throw new UnrecoverableError(formatFailure({ code: "MODEL_ERROR", message }));
        },
      );
    if (data.v !== WIRE_VERSION || data.kind !== "infer") {
      throw new UnrecoverableError(`INVALID_INPUT: unsupported message (v=${String(data.v)})`);
    }
    // Sync rows come through the sync lane; a BullMQ job is an async one, followed through
    // its event log (status, result or error, done) and cancellable.
    return this.custody.run(
      job,
      () => this.asyncRows.process(job, data, handler, token, lockDurationMs),
      (message) => this.asyncRows.refuse(job, token, lockDurationMs, message),
    );
  }
}
