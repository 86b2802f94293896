import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** The GenAI conventions' attributes, as Prometheus labels. */
const GEN_AI_LABELS = ["gen_ai_operation_name", "gen_ai_request_model", "gen_ai_response_model"];

/** The worker's own Prometheus metrics, served on its health port. */
export class WorkerMetrics {
  readonly registry = new Registry();
  readonly batchSize = new Histogram({
    name: "ferry_worker_batch_size",
    help: "Rows per executed batch",
    labelNames: ["model", "version"],
    buckets: [1, 2, 4, 8, 16, 32, 64, 128],
    registers: [this.registry],
  });
  readonly computeSeconds = new Histogram({
    name: "ferry_worker_compute_seconds",
    help: "Time one batch spent in ONNX Runtime",
    labelNames: ["model", "version"],
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly rows = new Counter({
    name: "ferry_worker_rows_total",
    help: "Rows handled, by outcome",
    labelNames: ["model", "version", "outcome"],
    registers: [this.registry],
  });
  readonly pending = new Gauge({
    name: "ferry_worker_pending_rows",
    help: "Rows waiting in the batcher",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });

  // OpenTelemetry's GenAI server metrics, by their conventions' names in Prometheus' form;
  // measured from the API's accept, so the queue is in them (as in vLLM's)
  readonly genAiTtft = new Histogram({
    name: "gen_ai_server_time_to_first_token_seconds",
    help: "Time to generate the first token, from the API's accept (GenAI semantic conventions)",
    labelNames: GEN_AI_LABELS,
    buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
    registers: [this.registry],
  });
  readonly genAiTpot = new Histogram({
    name: "gen_ai_server_time_per_output_token_seconds",
    help: "Time per output token after the first (GenAI semantic conventions)",
    labelNames: GEN_AI_LABELS,
    buckets: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
    registers: [this.registry],
  });
  readonly genAiDuration = new Histogram({
    name: "gen_ai_server_request_duration_seconds",
    help: "Time from the API's accept to the last token, or to the failure (GenAI semantic conventions)",
    labelNames: [...GEN_AI_LABELS, "error_type"],
    buckets: [
      0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ],
    registers: [this.registry],
  });

  readonly ttft = new Histogram({
    name: "ferry_worker_time_to_first_token_seconds",
    help: "Time from a sequence's arrival at the engine to its first token",
    labelNames: ["model", "version"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly interToken = new Histogram({
    name: "ferry_worker_inter_token_seconds",
    help: "Time between consecutive tokens of a sequence",
    labelNames: ["model", "version"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly runningSeqs = new Gauge({
    name: "ferry_worker_running_sequences",
    help: "Sequences holding a batch slot",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly waitingSeqs = new Gauge({
    name: "ferry_worker_waiting_sequences",
    help: "Sequences waiting for a batch slot",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: "ferry_worker_generated_tokens_total",
    help: "Tokens generated",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly cancelledSeqs = new Counter({
    name: "ferry_worker_cancelled_sequences_total",
    help: "Sequences that left because their client cancelled",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  /** vLLM's prefix cache pair: prompt tokens looked up, and those found (not computed). */
  readonly prefixCacheQueries = new Counter({
    name: "ferry_worker_prefix_cache_queries_total",
    help: "Prompt tokens looked up in the prefix cache (prompts not scored position by position)",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly prefixCacheHits = new Counter({
    name: "ferry_worker_prefix_cache_hits_total",
    help: "Prompt tokens whose KV cache came from the prefix cache instead of being computed",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly resumedSeqs = new Counter({
    name: "ferry_worker_resumed_sequences_total",
    help: "Completions taken over from a worker that died or lost its lock, resumed after the tokens already sent",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });
  readonly preemptedSeqs = new Counter({
    name: "ferry_worker_preempted_sequences_total",
    help: "Times an offline batch's sequence gave its seat up to waiting interactive ones (its KV cache freed, recomputed when it rejoins)",
    labelNames: ["model", "version"],
    registers: [this.registry],
  });

  constructor() {
    // the event-loop lag histogram samples on a timer: prom-client's 10 ms default woke an
    // idle process 100 times a second; a stall long enough to matter spans a 100 ms sample too
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }
}
