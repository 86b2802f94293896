import { z } from "zod";

const envSchema = z.object({
  REDIS_URL: z.string().default("redis://127.0.0.1:6379"),
  /** Prefix of every Redis key; API and workers of one deployment share it. */
  FERRY_PREFIX: z.string().default("ferry"),
  MODEL_REPOSITORY: z.string().default("./models"),
  /** Comma list of models to serve; empty serves every model in the repository. */
  WORKER_MODELS: z.string().default(""),
  EXECUTION_PROVIDER: z.enum(["cpu", "cuda"]).default("cpu"),
  /** Port of the worker's /metrics and /health endpoints; 0 leaves them off. */
  WORKER_PORT: z.coerce.number().int().min(0).default(0),
  /** A job whose worker stops renewing its lock this long is handed to another worker, in ms. */
  LOCK_DURATION_MS: z.coerce.number().int().positive().default(10_000),
  STALLED_INTERVAL_MS: z.coerce.number().int().positive().default(5_000),
  LOG_LEVEL: z.string().default("info"),
  /** How long job event logs and batch results stay readable, in s (as the API's). */
  JOB_TTL_S: z.coerce.number().int().positive().default(86_400),
  WORKER_ID: z.string().optional(),
});
export type WorkerEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): WorkerEnv {
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`invalid environment: ${first?.path.join(".")}: ${first?.message}`);
  }
  return parsed.data;
}
