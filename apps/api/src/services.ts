import type { ModelRepository } from "@ferry/model-repository";
import type { TraceCarrier } from "@ferry/telemetry";
import type { InferenceClient } from "@ferry/transport";
import type { HttpBindings } from "@hono/node-server";
import type { Logger } from "pino";
import type { AdminService, HealthService } from "./admin/admin-service.js";
import type { BatchJobReader } from "./batches/batch-job-reader.js";
import type { BatchJobService } from "./batches/batch-job-service.js";
import type { OpenAiBatchService } from "./batches/openai-batch-service.js";
import type { ApiEnv } from "./env.js";
import type { FileService } from "./files/file-service.js";
import type { ServerTiming } from "./http/server-timing.js";
import type { StreamSlots } from "./http/stream-slots.js";
import type { Tenant } from "./http/tenant.js";
import type { InferenceService } from "./inference/inference-service.js";
import type { JobService } from "./jobs/job-service.js";
import type { V2InferService } from "./kserve-v2/v2-infer-service.js";
import type { ApiMetrics } from "./metrics.js";
import type { CompletionService } from "./openai/completion-service.js";
import type { EmbeddingsService } from "./openai/embeddings-service.js";
import type { ResponsesService } from "./openai/responses-service.js";
import type { TokenizationService } from "./openai/tokenization-service.js";

/** Everything a route may use, built once at boot and handed to the routes through Hono's context. */
export interface Services {
  env: ApiEnv;
  admin: AdminService;
  health: HealthService;
  log: Logger;
  repository: ModelRepository;
  client: InferenceClient;
  inference: InferenceService;
  /** KServe v2 infer on classifiers, over `inference`. */
  v2: V2InferService;
  jobs: JobService;
  completions: CompletionService;
  /** OpenAI's embeddings on embedder models (also what v2 infer runs an embedder on). */
  embeddings: EmbeddingsService;
  tokenization: TokenizationService;
  responses: ResponsesService;
  batchJobs: BatchJobService;
  batchJobReader: BatchJobReader;
  /** OpenAI's Files API (batch input files, batch outputs). */
  files: FileService;
  /** OpenAI's Batch API (its batches run on `OpenAiBatchRunner`, on every replica). */
  openAiBatches: OpenAiBatchService;
  metrics: ApiMetrics;
  /** Open event streams, capped per process and per tenant. */
  streams: StreamSlots;
  /** Shows the repository's current versions on /admin/queues (after a reload). */
  refreshQueueBoard?: () => void;
  /** True once SIGTERM arrived: readiness goes red so the load balancer stops sending. */
  draining: () => boolean;
  /** Aborted when the drain starts: resumable streams end and their clients reconnect elsewhere. */
  drainSignal: AbortSignal;
  /** OpenTelemetry traces are recorded and exported (the OTEL_* variables name an exporter). */
  tracing: boolean;
}

export type HonoEnv = {
  /** The Node request and response, for the routes that write their answer themselves (SSE). */
  Bindings: HttpBindings;
  Variables: {
    services: Services;
    requestId: string;
    tenant: Tenant;
    /** The version a sync request was admitted to before its body was read (`admission.ts`). */
    admittedVersion?: string;
    /** Gives back the place that admission held for the request. */
    releaseAdmission?: () => void;
    /** How long the request waited in the turn share after admission, in ms (`admission.ts`). */
    waitedMs?: number;
    /** Where the answer's time went (`middleware/server-timing.ts`). */
    serverTiming?: ServerTiming;
    namedJobs?: string[];
    /** The request's trace context, when traced (`middleware/tracing.ts`). */
    trace?: TraceCarrier;
    /** A chunked body's size, once `bodyLimits` has read it whole. */
    bodyBytes?: number;
    /**
     * Weighs what a binary body's tensors make once its JSON head says (`bodyWeight`): throws
     * past the route's limit, else counts it against the sender's rate.
     */
    weighMore?: (extra: number) => void;
  };
};
