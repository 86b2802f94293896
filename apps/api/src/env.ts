import { deploymentEnvSchema, parseEnv } from "@ferry/protocol";
import { z } from "zod";

/** The API's environment; `test/docs.test.ts` reads its keys. */
export const envSchema = deploymentEnvSchema.extend({
  PORT: z.coerce.number().int().min(0).max(65_535).default(8000),
  HOST: z.string().default("127.0.0.1"),
  /** Comma list of accepted API keys; unset leaves /v1 and /v2 open. */
  API_KEYS: z.string().optional(),
  /** Bearer token for /admin; unset answers 403 there. */
  ADMIN_TOKEN: z.string().optional(),
  /** Largest request body, in bytes. */
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(8 * 1024 * 1024),
  /** Requests per second one API key may start, per API process; unset: no limit. */
  KEY_RATE_LIMIT_RPS: z.coerce.number().positive().optional(),
  /** Requests one key may start at once after a pause. @defaultValue 2 x KEY_RATE_LIMIT_RPS */
  KEY_RATE_BURST: z.coerce.number().int().positive().optional(),
  /** Requests of one API key open at once, per API process; unset: no cap. */
  KEY_MAX_CONCURRENT: z.coerce.number().int().positive().optional(),
  /**
   * Bytes of request bodies of 64 KiB and more (a JSON body by its weight: `jsonWeight`) one
   * API key may send a second, per API process (parsing them is the event loop's alone); 0: no
   * limit.
   */
  KEY_BODY_BYTES_PER_S: z.coerce
    .number()
    .int()
    .nonnegative()
    .default(16 * 1024 * 1024),
  /**
   * Longest a sync request may expect to wait in its queue (queue depth over the rate it is
   * being served at), in ms; past it, 429 at once rather than a late answer.
   */
  QUEUE_WAIT_BUDGET_MS: z.coerce.number().int().positive().default(5_000),
  /**
   * The share of a model's `max_queue_size` that batch lines (the lowest priority band) may
   * fill; the rest is kept for interactive requests, which get 429 only past it.
   */
  BATCH_QUEUE_SHARE: z.coerce.number().gt(0).max(1).default(0.5),
  /**
   * The share of a model's `max_queue_size` one API key's waiting jobs (async jobs, completions,
   * its batches' lines) may hold: another key's requests are not refused because one filled
   * the queue. 1 holds none (a deployment of one key).
   */
  KEY_QUEUE_SHARE: z.coerce.number().gt(0).max(1).default(0.5),
  /**
   * The highest priority an API key may ask (1-10); the admin may ask any. Priorities are not
   * shared out between keys: a key's 10 runs before another's 5, so where keys are parties
   * that should not outrank each other, 7 keeps 8-10 the admin's.
   */
  KEY_MAX_PRIORITY: z.coerce.number().int().min(1).max(10).default(10),
  /**
   * Replicas that must hold an async job (or batch chunk) before it is accepted: WAIT on the
   * accepting write, so that a primary's failover cannot lose it. 0 (no WAIT) on one Redis
   * without replicas; 1 on a cluster with a replica per primary.
   */
  ACCEPT_REPLICAS: z.coerce.number().int().min(0).default(0),
  /** How long an accept waits for ACCEPT_REPLICAS before it answers 503, in ms. */
  ACCEPT_REPLICAS_TIMEOUT_MS: z.coerce.number().int().positive().default(500),
  /**
   * How long a sync completion's or chat's job and event log are kept once it ends, in s:
   * long enough to resume its stream (`/v1/jobs/{id}/events`); async jobs and stored
   * responses are kept JOB_TTL_S.
   */
  SYNC_JOB_TTL_S: z.coerce.number().int().positive().default(3_600),
  /**
   * How long the answer to a request with an Idempotency-Key is replayed to its retries, in s
   * (Stripe's 24 h).
   */
  IDEMPOTENCY_TTL_S: z.coerce.number().int().positive().default(86_400),
  /** Event streams (SSE) one API process holds open; past it, 503. */
  MAX_STREAMS: z.coerce.number().int().positive().default(1_000),
  /** Event streams one API key holds open per API process; past it, 429. */
  MAX_STREAMS_PER_KEY: z.coerce.number().int().positive().default(100),
  /** Largest NDJSON batch upload, in bytes (read as it streams in, never buffered whole). */
  MAX_BATCH_BODY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024),
  /** Largest file the Files API takes, in bytes (checked as it streams; OpenAI's 200 MB). */
  MAX_FILE_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(200 * 1024 * 1024),
  /** Most lines (requests) of one batch input file (OpenAI's 50,000). */
  MAX_FILE_LINES: z.coerce.number().int().positive().default(50_000),
  /**
   * Bytes of uploaded files one API key may keep at once (they live in Redis): an upload
   * reserves what it may take before a byte is stored; past it, 403 until files are deleted
   * or expire.
   */
  FILE_STORAGE_PER_KEY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024 * 1024),
  /**
   * Bytes of rows one API key's Ferry batches (`POST /v1/batches?model=`) may hold waiting to
   * run, across every replica: each batch's rows are held as they are queued and given back
   * when it completes; past it the upload is refused (403 insufficient_quota). 0: no limit.
   */
  BATCH_ROWS_PER_KEY_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(1024 * 1024 * 1024),
  /**
   * OpenAI-shaped batches one API key runs at once, across every replica: the rest wait their
   * turn (`validating`), and another key's batch gets a runner meanwhile.
   */
  BATCHES_RUNNING_PER_KEY: z.coerce.number().int().positive().default(4),
  /** Uploaded files one API key may keep at once (uploads in progress included). */
  FILES_PER_KEY: z.coerce.number().int().positive().default(1_000),
  /**
   * The nice value of the API's parse thread (Linux), which does only offline work (batch
   * uploads, input files, result lines): above 0 its cores go to every other thread whenever
   * they want them, batch work's included. 0: the process's own priority.
   */
  PARSE_THREAD_NICE: z.coerce.number().int().min(0).max(19).default(0),
  /**
   * "off" sends every predict request through Hono's route instead of the fast path
   * (`predict-fast-path.ts`): the same answers, at a higher cost per request.
   */
  PREDICT_FAST_PATH: z
    .enum(["on", "off"])
    .default("on")
    .transform((v) => v === "on"),
  /**
   * A second port answering only the probes and /metrics (`probe-server.ts`); unset: none.
   * Kubernetes probes go there: a busy Node server accepts one new connection per event-loop
   * turn, so on the main port a probe's connection can wait behind every other one.
   */
  PROBE_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
});
export type ApiEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): ApiEnv {
  return parseEnv(envSchema, source);
}
