import { randomUUID } from "node:crypto";
import {
  type InferJob,
  type InferRow,
  parseQueueName,
  queueName,
  type RowInputs,
  type RowResult,
  WIRE_VERSION,
} from "@ferry/protocol";
import { Queue } from "bullmq";
import { ChannelMux } from "../shared/channel-mux.js";
import { createFastFailRedis, createRedis, type RedisClient } from "../shared/connection.js";
import { ControlChannel } from "../shared/control-channel.js";
import type { AcceptReplicas } from "../shared/durable-accept.js";
import { EventWriter } from "../shared/event-log.js";
import { bullQueueName, Keys } from "../shared/keys.js";
import { LogCloser } from "../shared/log-closer.js";
import { assertReady } from "../shared/redis-guard.js";
import { WorkerRegistry } from "../shared/worker-registry.js";
import { BatchJobStore } from "./batch-job-store.js";
import { type CoalescedGroup, Coalescer, type RowLookup } from "./coalescer.js";
import { EventReader } from "./event-reader.js";
import { JobClient } from "./job-client.js";
import { type CachedAnswer, type CacheScope, PredictionCache } from "./prediction-cache.js";
import { queueBoardAdapters } from "./queue-board.js";
import { QueueCounts } from "./queue-counts.js";
import { QueueDepth } from "./queue-depth.js";
import { ReplyRouter } from "./reply-router.js";
import { ServingState } from "./serving-state.js";
import { ServingStats } from "./serving-stats.js";
import { SyncLaneProducer } from "./sync-lane-producer.js";

export interface InferenceClientOptions {
  redisUrl: string;
  /** Seed nodes ("host:port") of a Redis Cluster; when given, `redisUrl` only lends credentials. */
  clusterNodes?: readonly string[] | undefined;
  /** Key prefix shared by the API and its workers. @defaultValue "ferry" */
  prefix?: string;
  /** How long finished async jobs stay pollable, in seconds. @defaultValue 86_400 */
  jobTtlS?: number;
  /**
   * Longest a sync row may expect to wait in its queue (depth over the measured service
   * rate), in ms; past it the row is refused with 429 at once. @defaultValue 5_000
   */
  queueWaitBudgetMs?: number;
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

export interface InferRequest {
  model: string;
  version: string;
  inputs: RowInputs;
  /** Epoch ms after which the row must not be computed. */
  deadline: number;
  /** 1 (lowest) to 10 (highest). */
  priority: number;
  /** Rows one job may carry: the model's max_batch_size. */
  maxRowsPerJob: number;
  /** Requests waiting past which `infer` and `submitJob` refuse with QUEUE_FULL. */
  maxQueueSize: number;
}

/** Where a sync row's answer may already be stored. */
export interface RowCache {
  scope: CacheScope;
  /** How long a stored answer stays fresh, in s. */
  ttlS: number;
  /** The row's name in the cache. */
  inputHash: string;
}

/** A sync row's outcome: its stored answer, or the model's result. */
export type LookedUp<T> = { hit: CachedAnswer<T> } | { result: RowResult };

/** A row answered by the lookup-or-append script: its stored answer, as Redis holds it. */
interface StoredHit {
  hit: string;
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

/** A sync row sent and not yet answered: what it takes to send it again. */
interface SentRow {
  queue: string;
  priority: number;
  maxRows: number;
  row: InferRow;
}

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
  readonly cache: PredictionCache;
  /** Broadcasts to every replica and worker: config changes, reloads, cancels. */
  readonly control: ControlChannel;
  /** Offline batch prediction: flows of chunk jobs, results stored by key. */
  readonly batches: BatchJobStore;
  private readonly redis: RedisClient;
  /**
   * The sync path's own connection (lane, cache): its commands never queue behind BullMQ's
   * on the shared one. Not auto-pipelined: the lane and the cache already send one command
   * per turn each, and ioredis' auto-pipelining held every command for another turn of the
   * event loop (a setImmediate), which a one-client request waited through on its way in.
   * Side by side (README's benchmarks): one client's p50 lower in 10 pairs of 10.
   */
  private readonly hot: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly queues = new Map<string, Queue>();
  private readonly router: ReplyRouter;
  private readonly mux: ChannelMux;

  private readonly coalescer: Coalescer;
  private readonly lane: SyncLaneProducer;
  /** Rows sent and not yet answered, by row id. */
  private readonly unanswered = new Map<string, SentRow>();
  /** Rows sent with a cache lookup, by row id: told their stored answer when it hit. */
  private readonly hits = new Map<string, (raw: string) => void>();
  /** Admission, and the queue lengths the queue-depth gauge exports. */
  readonly depth: QueueDepth;
  private readonly jobTtlS: number;
  private nextRow = 0;
  private sweeping: NodeJS.Timeout | undefined;
  private sweepingRemovals: NodeJS.Timeout | undefined;

  constructor(options: InferenceClientOptions) {
    this.keys = new Keys(options.prefix ?? "ferry");
    this.jobTtlS = options.jobTtlS ?? 86_400;
    // While Redis is down or frozen a request fails in a moment (503), never hangs.
    const target = { url: options.redisUrl, clusterNodes: options.clusterNodes };
    this.redis = createFastFailRedis(target);
    this.subscriber = createRedis(target, { shardedSubscribers: true });
    this.hot = createFastFailRedis(target);
    this.redis.on("error", () => {});
    this.hot.on("error", () => {});
    this.subscriber.on("error", () => {});
    this.mux = new ChannelMux(this.subscriber);
    this.router = new ReplyRouter(this.mux, this.keys.reply(this.instanceId), () => this.resend());
    this.control = new ControlChannel(this.redis, this.mux, this.keys);
    this.state = new ServingState(this.redis, this.control, this.keys);
    this.stats = new ServingStats(this.redis, this.keys);
    this.cache = new PredictionCache(this.hot, this.keys);
    const accept = options.acceptReplicas ?? { replicas: 0, timeoutMs: 500 };
    this.batches = new BatchJobStore(
      this.redis,
      this.keys,
      (name) => this.queue(name),
      this.jobTtlS,
      accept,
    );
    this.coalescer = new Coalescer((group) => void this.send(group));
    this.lane = new SyncLaneProducer(this.hot, this.keys);
    this.depth = new QueueDepth(new QueueCounts((name) => this.queue(name), this.lane), {
      waitBudgetMs: options.queueWaitBudgetMs ?? 5_000,
    });
    this.workers = new WorkerRegistry(this.redis, this.keys);
    this.jobs = new JobClient(
      this.redis,
      this.keys,
      (name) => this.queue(name),
      this.depth,
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
    for (const redis of [this.redis, this.hot])
      if (redis.status !== "ready")
        await new Promise<void>((resolve) => redis.once("ready", () => resolve()));
    await this.router.whenReady();
    await this.state.start();
    this.stats.start();
    this.sweeping = every(DEADLINE_SWEEP_MS, this.redis, () => this.jobs.removal.sweepDeadlines());
    this.sweepingRemovals = every(REMOVAL_SWEEP_MS, this.redis, () =>
      Promise.all([this.jobs.removal.sweepRemovals(), this.state.finishInterruptedReloads()]),
    );
  }

  /**
   * Redis answers, and the sync path's own connection is up too: each connection reconnects
   * on its own backoff (up to 2 s apart), and a replica that answered its readiness probe on
   * one while the other still waited refused the sync predicts sent to it (503).
   */
  async ping(): Promise<boolean> {
    if (this.hot.status !== "ready") return false;
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
  async infer(req: InferRequest): Promise<RowResult> {
    // the connection the row's group goes over
    assertReady(this.hot);
    const name = queueName(req.model, req.version);
    this.depth.admitRow(name, req.maxQueueSize, req.deadline);
    return resultOf(await this.enqueue(req, name));
  }

  /**
   * Answers one row from the prediction cache when it holds a fresh answer, else from the
   * model. The lookup and the enqueue of a miss are one script (one round trip, with the
   * row's neighbours of this turn). A queue that cannot take the row still answers what the
   * cache holds, and refuses (QUEUE_FULL) only a miss: a stored answer needs no queue.
   */
  async inferOrLookUp<T>(req: InferRequest, cache: RowCache): Promise<LookedUp<T>> {
    const now = Date.now();
    const cutoff = now - cache.ttlS * 1000;
    const near = this.cache.peek<T>(cache.scope, cache.inputHash);
    if (near && near.at >= cutoff) return { hit: near };
    assertReady(this.hot);
    const name = queueName(req.model, req.version);
    try {
      this.depth.admitRow(name, req.maxQueueSize, req.deadline);
    } catch (refused) {
      const stored = await this.cache.get<T>(cache.scope, cache.inputHash).catch(() => undefined);
      if (stored && stored.at >= cutoff) return { hit: stored };
      throw refused;
    }
    const lookup = {
      buckets: this.cache.buckets(cache.scope, now),
      cutoff,
      field: cache.inputHash,
    };
    const outcome = await this.enqueue(req, name, lookup);
    if (!("hit" in outcome)) return { result: outcome };
    const hit = this.cache.found<T>(cache.scope, cache.inputHash, outcome.hit);
    // an entry the script took for fresh but that does not decode: the model answers after all
    return hit ? { hit } : { result: resultOf(await this.enqueue(req, name)) };
  }

  /** Sends one admitted row and waits for its answer, or for its stored one (with `lookup`). */
  private async enqueue(
    req: InferRequest,
    name: string,
    lookup?: RowLookup,
  ): Promise<RowResult | StoredHit> {
    const rid = `${this.instanceId}.${this.nextRow++}`;
    const answer = this.router.wait(rid);
    const stored = lookup
      ? new Promise<StoredHit>((resolve) => this.hits.set(rid, (hit) => resolve({ hit })))
      : undefined;
    const wait = Math.max(0, req.deadline - Date.now());
    const timer = setTimeout(() => {
      this.router.settle(rid, deadlineResult(rid));
    }, wait);
    this.depth.enter(name);
    const sent: SentRow = {
      queue: name,
      priority: req.priority,
      maxRows: req.maxRowsPerJob,
      row: { rid, inputs: req.inputs, deadline: req.deadline },
    };
    this.unanswered.set(rid, sent);
    this.coalescer.push(name, req.priority, req.maxRowsPerJob, sent.row, lookup);
    try {
      const outcome = await (stored ? Promise.race([answer, stored]) : answer);
      if (!("hit" in outcome) && (outcome.ok || outcome.error.code !== "DEADLINE_EXCEEDED"))
        this.depth.served(name);
      return outcome;
    } finally {
      clearTimeout(timer);
      this.unanswered.delete(rid);
      this.hits.delete(rid);
      this.router.forget(rid);
      this.depth.leave(name);
    }
  }

  /** bull-board adapters over these queues (model-version queue names). */
  queueBoard(names: readonly string[]): ReturnType<typeof queueBoardAdapters> {
    return queueBoardAdapters((name) => this.queue(name), names);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeping);
    clearInterval(this.sweepingRemovals);
    this.stats.stop();
    await this.batches.close().catch(() => undefined);
    await this.stats.flush().catch(() => undefined);
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    this.subscriber.disconnect();
    await Promise.all([
      this.redis.quit().catch(() => undefined),
      this.hot.quit().catch(() => undefined),
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

  private async send(group: CoalescedGroup): Promise<void> {
    const { model, version } = parseQueueName(group.queue);
    const data: InferJob = {
      v: WIRE_VERSION,
      kind: "infer",
      model,
      version,
      rows: group.rows,
      reply_to: this.router.channel,
      accepted_at: Date.now(),
    };
    try {
      const lookups = group.lookups;
      const first = lookups?.find((l) => l !== undefined);
      if (!lookups || !first) {
        await this.lane.send(group.queue, group.priority, data);
        return;
      }
      const stored = await this.lane.sendLooking(group.queue, group.priority, data, {
        buckets: first.buckets,
        cutoff: first.cutoff,
        fields: lookups.map((l) => l?.field ?? ""),
      });
      stored.forEach((raw, i) => {
        const rid = group.rows[i]?.rid;
        if (raw !== undefined && rid !== undefined) this.hits.get(rid)?.(raw);
      });
    } catch (err) {
      const message = `queue unavailable: ${err instanceof Error ? err.message : String(err)}`;
      for (const row of group.rows) {
        this.router.settle(row.rid, {
          rid: row.rid,
          ok: false,
          error: { code: "UNAVAILABLE", message },
        });
      }
    }
  }

  /**
   * After the subscriber reconnected: answers published meanwhile are lost, and so may be
   * the lane itself (a Redis restarted without persistence). Every row still waiting is sent
   * again; inference is a pure function of the row, and the first answer wins.
   */
  private resend(): void {
    for (const sent of this.unanswered.values())
      this.coalescer.push(sent.queue, sent.priority, sent.maxRows, sent.row);
  }
}

function resultOf(outcome: RowResult | StoredHit): RowResult {
  if (!("hit" in outcome)) return outcome;
  throw new Error("a row sent without a cache lookup was answered from the cache");
}

function deadlineResult(rid: string): RowResult {
  return {
    rid,
    ok: false,
    error: { code: "DEADLINE_EXCEEDED", message: "deadline passed before an answer" },
  };
}

/**
 * Runs `sweep` every `ms` while `redis` is up, one at a time: a sweep whose log ends Redis
 * refuses takes the closer's retries, and the next waits for it rather than piling up.
 */
function every(ms: number, redis: RedisClient, sweep: () => Promise<unknown>): NodeJS.Timeout {
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
