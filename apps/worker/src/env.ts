import { deploymentEnvSchema, parseEnv } from "@ferry/protocol";
import { z } from "zod";

/** A worker's environment; `test/docs.test.ts` reads its keys. */
export const envSchema = deploymentEnvSchema.extend({
  /** Comma list of models to serve; empty serves every model in the repository. */
  WORKER_MODELS: z.string().default(""),
  EXECUTION_PROVIDER: z.enum(["cpu", "cuda"]).default("cpu"),
  /** Port of the worker's /metrics and /health endpoints; 0 leaves them off. */
  WORKER_PORT: z.coerce.number().int().min(0).default(0),
  /** A job whose worker stops renewing its lock this long is handed to another worker, in ms. */
  LOCK_DURATION_MS: z.coerce.number().int().positive().default(10_000),
  STALLED_INTERVAL_MS: z.coerce.number().int().positive().default(5_000),
  WORKER_ID: z.string().optional(),
});
export type WorkerEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): WorkerEnv {
  return parseEnv(envSchema, source);
}
