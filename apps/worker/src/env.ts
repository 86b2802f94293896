import { deploymentEnvSchema, parseEnv } from "@ferry/protocol";
import { z } from "zod";

const envSchema = deploymentEnvSchema.extend({
  /** Comma list of models to serve; empty serves every model in the repository. */
  WORKER_MODELS: z.string().default(""),
  EXECUTION_PROVIDER: z.enum(["cpu", "cuda"]).default("cpu"),
  /** Port of the worker's /metrics and /health endpoints; 0 leaves them off. */
  WORKER_PORT: z.coerce.number().int().min(0).default(0),
  /** A job whose worker stops renewing its lock this long is handed to another worker, in ms. */
  LOCK_DURATION_MS: z.coerce.number().int().positive().default(10_000),
  STALLED_INTERVAL_MS: z.coerce.number().int().positive().default(5_000),
  WORKER_ID: z.string().optional(),
  /**
   * How long a drain (SIGTERM, Ctrl-C) waits for the jobs running here before the worker
   * exits anyway, in ms; what still runs is then handed to another worker as a stalled job.
   * Under Kubernetes' termination grace (120 s in infra/), so that the worker says so itself.
   */
  DRAIN_TIMEOUT_MS: z.coerce.number().int().positive().default(100_000),
});
export type WorkerEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): WorkerEnv {
  return parseEnv(envSchema, source);
}
