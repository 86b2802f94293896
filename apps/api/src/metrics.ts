import type { RowTiming } from "@ferry/protocol";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

const latencyBuckets = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/**
 * The API's Prometheus metrics. Queue time, compute time and batch size come back with every
 * answer from the workers, so one scrape of any API replica shows the whole path.
 */
export class ApiMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: "ferry_http_requests_total",
    help: "HTTP requests by route, method and status",
    labelNames: ["route", "method", "status"],
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: "ferry_http_request_duration_seconds",
    help: "HTTP request latency by route",
    labelNames: ["route", "method"],
    buckets: latencyBuckets,
    registers: [this.registry],
  });
  readonly queueWait = new Histogram({
    name: "ferry_queue_wait_seconds",
    help: "Time a classifier row waited from this API's accept to a worker's pick-up (Redis and the transport)",
    labelNames: ["model", "version"],
    buckets: latencyBuckets,
    registers: [this.registry],
  });
  readonly batchWait = new Histogram({
    name: "ferry_batch_wait_seconds",
    help: "Time a classifier row waited in the worker's dynamic batcher before its batch ran",
    labelNames: ["model", "version"],
    buckets: latencyBuckets,
    registers: [this.registry],
  });
  /** The batcher's wait under its first name, kept for dashboards that read it. */
  readonly queueTime = new Histogram({
    name: "ferry_queue_time_seconds",
    help: "Time a request waited in the worker's batcher before its batch ran",
    labelNames: ["model", "version"],
    buckets: latencyBuckets,
    registers: [this.registry],
  });
  readonly computeTime = new Histogram({
    name: "ferry_compute_time_seconds",
    help: "ONNX Runtime time of the batch a request ran in",
    labelNames: ["model", "version"],
    buckets: latencyBuckets,
    registers: [this.registry],
  });
  readonly batchSize = new Histogram({
    name: "ferry_batch_size",
    help: "Size of the batch each request ran in (request-weighted)",
    labelNames: ["model", "version"],
    buckets: [1, 2, 4, 8, 16, 32, 64, 128],
    registers: [this.registry],
  });
  readonly inferences = new Counter({
    name: "ferry_inference_requests_total",
    help: "Inference rows by model, version and outcome code",
    labelNames: ["model", "version", "outcome"],
    registers: [this.registry],
  });

  readonly cache = new Counter({
    name: "ferry_cache_requests_total",
    help: "Prediction cache lookups by result (hit, miss)",
    labelNames: ["model", "result"],
    registers: [this.registry],
  });
  readonly fallbacks = new Counter({
    name: "ferry_fallbacks_total",
    help: "Answers given by a fallback, by source (fallback_cache, fallback_default, none = 503)",
    labelNames: ["model", "source"],
    registers: [this.registry],
  });

  /** OpenTelemetry's GenAI client metric: tokens per completion, by type (input, output). */
  readonly genAiTokenUsage = new Histogram({
    name: "gen_ai_client_token_usage",
    help: "Tokens used per completion, by gen_ai_token_type (GenAI semantic conventions)",
    labelNames: ["gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"],
    buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304],
    registers: [this.registry],
  });

  readonly completionTokens = new Counter({
    name: "ferry_completion_tokens_total",
    help: "Tokens of the completions and chats this API answered (streamed or not)",
    labelNames: ["model"],
    registers: [this.registry],
  });

  /**
   * Work waiting per queue (BullMQ wait + prioritized, and sync-lane groups not yet read):
   * what KEDA scales workers on.
   */
  readonly queueDepth = new Gauge({
    name: "ferry_queue_waiting_jobs",
    help: "Jobs waiting in each model version's queue (waiting + prioritized), read at scrape time",
    labelNames: ["queue"],
    registers: [this.registry],
  });
  /** Admitted sync requests waiting for an event-loop turn (see `turn-share.ts`). */
  readonly turnWaiting = new Gauge({
    name: "ferry_api_turn_waiting_requests",
    help: "Admitted sync requests waiting in this API process for an event-loop turn to parse them; above zero for long, the API process, not the workers, is the bottleneck",
    registers: [this.registry],
  });
  /** HTTP metrics' children by route, method and status (see `recordHttp`). */
  private readonly boundHttp = new Map<
    string,
    { count: { inc(): void }; time: { observe(seconds: number): void } }
  >();
  private depthSource: (() => Promise<Record<string, number>>) | undefined;
  private turnSource: (() => number) | undefined;

  /** Where queue depths come from at scrape time (the transport). */
  watchQueues(source: () => Promise<Record<string, number>>): void {
    this.depthSource = source;
  }

  /** How many requests wait for an event-loop turn, read at scrape time. */
  watchTurns(source: () => number): void {
    this.turnSource = source;
  }

  /** Refreshes the scrape-time gauges, then renders every metric. */
  async render(): Promise<string> {
    if (this.turnSource) this.turnWaiting.set(this.turnSource());
    if (this.depthSource) {
      const depths = await this.depthSource().catch(() => ({}));
      for (const [queue, n] of Object.entries(depths)) this.queueDepth.set({ queue }, n);
    }
    return this.registry.metrics();
  }

  constructor() {
    // the event-loop lag histogram samples on a timer: prom-client's 10 ms default woke an
    // idle process 100 times a second; a stall long enough to matter spans a 100 ms sample too
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  observeRow(model: string, version: string, timing: RowTiming): void {
    const labels = { model, version };
    if (timing.wait_ms !== undefined) this.queueWait.observe(labels, timing.wait_ms / 1000);
    this.batchWait.observe(labels, timing.queue_ms / 1000);
    this.queueTime.observe(labels, timing.queue_ms / 1000);
    this.computeTime.observe(labels, timing.compute_ms / 1000);
    this.batchSize.observe(labels, timing.batch_size);
  }

  /**
   * Counts and times one HTTP request by its route pattern (not its path, which has ids in
   * it). The children are bound once per route, method and status: prom-client validates and
   * hashes a label set on every call otherwise, a noticeable share of a cheap request.
   */
  recordHttp(route: string, method: string, status: number, seconds: number): void {
    const key = `${route} ${method} ${status}`;
    let bound = this.boundHttp.get(key);
    if (!bound) {
      bound = {
        count: this.httpRequests.labels({ route, method, status: String(status) }),
        time: this.httpDuration.labels({ route, method }),
      };
      this.boundHttp.set(key, bound);
    }
    bound.count.inc();
    bound.time.observe(seconds);
  }
}
