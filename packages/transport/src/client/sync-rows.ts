import {
  type InferJob,
  type InferRow,
  parseQueueName,
  queueName,
  type RowInputs,
  type RowResult,
  type TraceCarrierWire,
  WIRE_VERSION,
} from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import { assertReady } from "../shared/redis-guard.js";
import { type CoalescedGroup, Coalescer, type RowLookup } from "./coalescer.js";
import type { CachedAnswer, CacheScope, PredictionCache } from "./prediction-cache.js";
import type { QueueDepth } from "./queue-depth.js";
import type { ReplyRouter } from "./reply-router.js";
import type { SyncLaneProducer } from "./sync-lane-producer.js";

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
  /** The request's trace context, carried to the worker (absent when tracing is off). */
  trace?: TraceCarrierWire | undefined;
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

/** A sync row sent and not yet answered: what it takes to send it again. */
interface SentRow {
  queue: string;
  priority: number;
  maxRows: number;
  row: InferRow;
}

/**
 * The sync path: each row admitted against its queue's depth, coalesced with its neighbours
 * of the turn into one lane entry (with a prediction-cache lookup in the same script where
 * asked), and answered over this replica's reply channel, or at its deadline. Rows still
 * waiting when the reply channel comes back are sent again: the first answer wins.
 */
export class SyncRows {
  private readonly coalescer: Coalescer;
  /** Rows sent and not yet answered, by row id. */
  private readonly unanswered = new Map<string, SentRow>();
  /** Rows sent with a cache lookup, by row id: told their stored answer when it hit. */
  private readonly hits = new Map<string, (raw: string) => void>();
  private nextRow = 0;

  constructor(
    /** The sync path's own connection: its commands never queue behind BullMQ's. */
    private readonly connection: RedisClient,
    private readonly lane: SyncLaneProducer,
    private readonly router: ReplyRouter,
    private readonly depth: QueueDepth,
    private readonly cache: PredictionCache,
    /** This replica's id: row ids are unique across replicas. */
    private readonly instanceId: string,
  ) {
    this.coalescer = new Coalescer((group) => void this.send(group));
  }

  /** Resolves once the reply channel is subscribed. */
  ready(): Promise<void> {
    return this.router.whenReady();
  }

  /** Runs one row through the model and waits for its answer (coalesced with its neighbours). */
  async infer(req: InferRequest): Promise<RowResult> {
    // the connection the row's group goes over
    assertReady(this.connection);
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
    assertReady(this.connection);
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
      row: req.trace
        ? { rid, inputs: req.inputs, deadline: req.deadline, trace: req.trace }
        : { rid, inputs: req.inputs, deadline: req.deadline },
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
  resend(): void {
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
