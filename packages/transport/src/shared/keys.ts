import { createHash } from "node:crypto";
/**
 * Names of Ferry's own Redis keys and channels (BullMQ names its own under the same prefix).
 * One prefix per deployment, or per test file, keeps deployments apart on one Redis.
 *
 * Braces are hash tags: a Redis Cluster places a key by the first `{...}` in its name, and a
 * script, a MULTI or a blocking read may only touch keys of one slot. So every key a model
 * version's queue works with carries `{<queue>}` (BullMQ's keys too, see bullQueueName), a
 * job's index keys carry `{<job id>}`, a batch's `{<batch id>}`: what must be together is,
 * and different queues, jobs and batches spread over the shards. docs/KEYS.md has the map.
 */
export class Keys {
  constructor(readonly prefix: string) {}

  /**
   * Shard channel (SPUBLISH) of one API process: workers publish the answers it waits for
   * here; on a cluster only the shard owning the tag carries them.
   */
  reply(instanceId: string): string {
    return `${this.prefix}:reply:{${instanceId}}`;
  }

  /** Broadcast channel telling every worker to stop work on a job. */
  get cancelChannel(): string {
    return `${this.prefix}:cancel`;
  }

  /**
   * The sync lane of a model-version queue at one priority band (0 = highest): a Redis Stream
   * of coalesced row groups, read by the workers' consumer group. The queue name in braces is
   * a hash tag, so that a worker's one read across the bands stays within one slot.
   */
  syncLane(queue: string, band: number): string {
    return `${this.prefix}:sync:{${queue}}:${band}`;
  }

  /** Marks an async job cancelled; read by the worker that picks it up and by status polls. */
  cancelled(jobId: string): string {
    return `${this.prefix}:cancelled:{${jobId}}`;
  }

  /** Sorted set of async job ids by deadline (epoch ms), swept by the API to expire them. */
  get deadlines(): string {
    return `${this.prefix}:deadlines`;
  }

  /**
   * Sorted set of async jobs being removed from their queue (cancelled, expired while queued),
   * by when their removal began: each member says whose log must be closed, and with what
   * error, until the remover has closed it; the API sweeps the ones a remover left behind.
   */
  get removals(): string {
    return `${this.prefix}:removals`;
  }

  /**
   * A client's Idempotency-Key, scoped to its API key's tenant (`scope`): the first request's
   * fingerprint and answer. The key is hashed: it is the client's text, of any characters.
   */
  idempotency(scope: string, key: string): string {
    const hashed = createHash("sha256").update(`${scope}\u0000${key}`).digest("base64url");
    return `${this.prefix}:idempotency:{${hashed}}`;
  }

  /** Which queue an async job id lives in, so a poll need not know model and version. */
  jobQueue(jobId: string): string {
    return `${this.prefix}:job-queue:{${jobId}}`;
  }

  /**
   * A job's event log (a capped Redis Stream); also the name of its live shard channel. It
   * shares its queue's slot: the fenced append checks the job's BullMQ lock in the same script.
   */
  events(job: JobRef): string {
    return `${this.prefix}:events:{${job.queue}}:${job.id}`;
  }

  /**
   * The id of the last append a job's event log took (see EventWriter): a write that Redis
   * applied but whose reply was lost in a failover, sent again, is not applied twice.
   */
  eventsApplied(job: JobRef): string {
    return `${this.events(job)}:applied`;
  }

  /**
   * Shard channel on which an API tells a generator queue's workers that an interactive
   * completion was just queued: a worker whose slots offline batches' lines hold takes it
   * at once instead of at its next look at the queue (see InteractiveReserve).
   */
  interactiveQueued(queue: string): string {
    return `${this.prefix}:interactive-queued:{${queue}}`;
  }

  /**
   * Which worker holds a BullMQ job whose work has started and not ended (see Custody); the
   * job's slot.
   */
  custody(job: JobRef): string {
    return `${this.prefix}:custody:{${job.queue}}:${job.id}`;
  }

  /** Set of the jobs a worker's work is running on now (see Custody). */
  holding(workerId: string): string {
    return `${this.prefix}:holding:{${workerId}}`;
  }

  /** Hash of version -> percent of a model's unpinned traffic. */
  traffic(model: string): string {
    return `${this.prefix}:traffic:{${model}}`;
  }

  /** Broadcast when shared serving config changes (traffic, reloads), so replicas refresh at once. */
  get configChannel(): string {
    return `${this.prefix}:config`;
  }

  /** Hash of per-version counters and latency histogram buckets of a model. */
  stats(model: string): string {
    return `${this.prefix}:stats:${model}`;
  }

  /**
   * Hash of what one model version did in one step of the dashboard's time series (requests,
   * errors, tokens, latency sketch, queue depth samples), added to by every process; expires
   * once out of the window. The queue's tag: a process writes a version's step and slowest
   * requests in one MULTI.
   */
  activity(queue: string, step: number): string {
    return `${this.prefix}:activity:{${queue}}:${step}`;
  }

  /** Sorted set of a model version's slowest requests in one minute, by total ms; capped. */
  slowest(queue: string, minute: number): string {
    return `${this.prefix}:slowest:{${queue}}:${minute}`;
  }

  /**
   * Hash of a model-version queue's cached predictions stored within one span of time (a
   * bucket). It carries the queue's tag: a sync row's cache lookup and its enqueue are one
   * script over the bucket and the lane.
   */
  cacheBucket(queue: string, bucket: number): string {
    return `${this.prefix}:cache:{${queue}}:${bucket}`;
  }

  /** Counter bumped by each reload of a model; cache keys carry it. */
  generation(model: string): string {
    return `${this.prefix}:generation:{${model}}`;
  }

  /**
   * When (epoch ms) a reload of the model was committed, until its generation moves: a marker
   * an API that dies between the two leaves behind, for another to finish (the generation's
   * slot, so that one script does both).
   */
  reloadCommit(model: string): string {
    return `${this.prefix}:reload-commit:{${model}}`;
  }

  /** Hash describing one offline batch: model, version, status, counts, timestamps. */
  batch(id: string): string {
    return `${this.prefix}:batch:{${id}}`;
  }

  /** Hash of item key -> NDJSON result line of one batch. */
  batchResults(id: string): string {
    return `${this.prefix}:batch-results:{${id}}`;
  }

  /** One chunk of an offline batch's rows, packed (binary), until the chunk is answered. */
  batchChunkRows(id: string, chunk: number): string {
    return `${this.prefix}:batch-rows:{${id}}:${chunk}`;
  }

  /** A chunk's answers, packed (`encodeChunkOutput`), in the batch's slot. */
  batchChunkOut(id: string, chunk: number): string {
    return `${this.prefix}:batch-out:{${id}}:${chunk}`;
  }

  /** Hash describing one uploaded file (the Files API): owner, name, purpose, size, lines. */
  file(id: string): string {
    return `${this.prefix}:file:{${id}}`;
  }

  /** List of a file's bytes, each element whole lines (so a reader never splits a line). */
  fileChunks(id: string): string {
    return `${this.prefix}:file-chunks:{${id}}`;
  }

  /** Hash of a batch input file's chunks (by index) whose predict lines the upload packed. */
  filePacked(id: string): string {
    return `${this.prefix}:file-packed:{${id}}`;
  }

  /** Set of the custom_ids a batch input file's upload has seen so far (they must be unique). */
  fileIds(id: string): string {
    return `${this.prefix}:file-ids:{${id}}`;
  }

  /** Sorted set of one tenant's files by creation time, for listing them. */
  files(owner: string): string {
    return `${this.prefix}:files:{owner:${owner}}`;
  }

  /** Hash of what one tenant keeps stored (file id -> bytes, and their total): its quota. */
  storageHeld(owner: string): string {
    return `${this.prefix}:storage:{owner:${owner}}`;
  }

  /** Hash of one tenant's Ferry batches' rows still to run (bytes each, and their total). */
  batchRowsHeld(owner: string): string {
    return `${this.prefix}:batch-rows-held:{owner:${owner}}`;
  }

  /** Sorted set of one tenant's batches holding rows, by expiry, beside `batchRowsHeld`. */
  batchRowsExpiry(owner: string): string {
    return `${this.prefix}:batch-rows-expiry:{owner:${owner}}`;
  }

  /**
   * Sorted set by expiry of what a tenant holds in its storage that is not a file (a running
   * batch's answers), beside `storageHeld`: counted in its bytes, not among its files.
   */
  storageHolds(owner: string): string {
    return `${this.prefix}:storage-holds:{owner:${owner}}`;
  }

  /** `storageHolds` for `batchRowsHeld` (the quota's script names one for either kind). */
  batchRowsHolds(owner: string): string {
    return `${this.prefix}:batch-rows-holds:{owner:${owner}}`;
  }

  /** Sorted set of one tenant's stored things by expiry, beside `storageHeld`. */
  storageExpiry(owner: string): string {
    return `${this.prefix}:storage-expiry:{owner:${owner}}`;
  }

  /**
   * Sorted set of one tenant's jobs waiting in a model version's queue (id -> enqueued at ms),
   * in the queue's slot beside BullMQ's own keys: what holds a key to its share of the queue.
   */
  ownerQueued(queue: string, owner: string): string {
    return `${this.prefix}:queued:{${queue}}:${owner}`;
  }

  /** Hash of an owner's last job and its turn, per priority, in a queue (`OwnerShare`). */
  ownerTurns(queue: string, owner: string): string {
    return `${this.prefix}:turns:{${queue}}:${owner}`;
  }

  /** An owner's batch lines (the lowest band) waiting in a queue: counted apart from the rest. */
  ownerQueuedLowest(queue: string, owner: string): string {
    return `${this.prefix}:queued:{${queue}}:${owner}:lowest`;
  }

  /** What BullMQ's key of one of a queue's jobs begins with (the job's id follows). */
  bullJobPrefix(queue: string): string {
    return `${this.prefix}:${bullQueueName(queue)}:`;
  }

  /** BullMQ's sorted set of a queue's waiting jobs that have a priority (Ferry's all do). */
  bullPrioritized(queue: string): string {
    return `${this.prefix}:${bullQueueName(queue)}:prioritized`;
  }

  /** Hash describing one OpenAI-shaped batch: status, counts, timestamps, files. */
  openAiBatch(id: string): string {
    return `${this.prefix}:openai-batch:{${id}}`;
  }

  /** Hash of line index -> the answer line of an OpenAI-shaped batch (written once per line). */
  openAiBatchLines(id: string): string {
    return `${this.prefix}:openai-batch-lines:{${id}}`;
  }

  /**
   * Sorted set of one tenant's OpenAI-shaped batches running now, scored by when each runner's
   * lease lapses (a runner that died stops counting then).
   */
  openAiBatchesRunning(owner: string): string {
    return `${this.prefix}:openai-batches-running:{owner:${owner}}`;
  }

  /** Sorted set of one tenant's OpenAI-shaped batches by creation time. */
  openAiBatches(owner: string): string {
    return `${this.prefix}:openai-batches:{owner:${owner}}`;
  }

  /**
   * Hash of item key -> the latest stored prediction of a model (served without inference),
   * one per tenant so that no key can read or overwrite another's, and one per span of
   * JOB_TTL_S (`epoch`, predictionEpoch's): a span's hash expires two spans after it opened,
   * its fields with it (one hash refreshed by every batch kept every key it ever got).
   */
  predictions(model: string, owner: string, epoch: number): string {
    return `${this.legacyPredictions(model, owner)}:@${epoch}`;
  }

  /** The predictions hash of a Ferry before spans (read, never written). */
  legacyPredictions(model: string, owner: string): string {
    return owner === ""
      ? `${this.prefix}:predictions:${model}`
      : `${this.prefix}:predictions:${model}:${owner}`;
  }

  /** Hash of worker id -> heartbeat (models served, expiry); readers skip stale entries. */
  get workers(): string {
    return `${this.prefix}:workers`;
  }
}

/** A job as its keys know it: the model-version queue it lives in, and its id. */
export interface JobRef {
  queue: string;
  id: string;
}

/**
 * The BullMQ name of a model-version queue: the name in braces, so that every key BullMQ
 * makes for it (`<prefix>:{<queue>}:wait`, `...:<job>:lock`) hashes to one cluster slot, the
 * slot of the queue's sync lane and job event logs.
 */
export function bullQueueName(queue: string): string {
  return `{${queue}}`;
}

/** The span of `ttlS` seconds that `nowMs` falls in: which predictions hash is written now. */
export function predictionEpoch(nowMs: number, ttlS: number): number {
  return Math.floor(nowMs / 1000 / ttlS);
}

/** The model-version queue a BullMQ queue name (bullQueueName's) stands for. */
export function queueOfBullName(name: string): string {
  return name.startsWith("{") && name.endsWith("}") ? name.slice(1, -1) : name;
}

/**
 * The queue of OpenAI-shaped batches to run (BullMQ's name for it is bullQueueName's): a job
 * per batch, taken by any API replica's runner, and by another once the replica running it
 * dies (its lock lapses).
 */
export const BATCH_RUNS_QUEUE = "batch-runs";

/**
 * The BullMQ queues of a model version's offline batches: a batch's parent job and its gate.
 * A flow's jobs are written by one script, so parent, gate and chunks (on the model's queue)
 * share its tag.
 */
export function batchQueueNames(queue: string): { parents: string; gates: string } {
  return { parents: `{${queue}}.batches`, gates: `{${queue}}.batch-gates` };
}
