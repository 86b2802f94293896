import { z } from "zod";

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(8000),
  HOST: z.string().default("127.0.0.1"),
  REDIS_URL: z.string().default("redis://127.0.0.1:6379"),
  /** Prefix of every Redis key; API and workers of one deployment share it. */
  FERRY_PREFIX: z.string().default("ferry"),
  MODEL_REPOSITORY: z.string().default("./models"),
  /** Comma list of accepted API keys; unset leaves /v1 and /v2 open. */
  API_KEYS: z.string().optional(),
  /** Bearer token for /admin; unset answers 403 there. */
  ADMIN_TOKEN: z.string().optional(),
  LOG_LEVEL: z.string().default("info"),
  /** How long finished async jobs, their event logs and batch results stay readable, in s. */
  JOB_TTL_S: z.coerce.number().int().positive().default(86_400),
  /** Largest request body, in bytes. */
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(8 * 1024 * 1024),
  /** How long a draining API waits for open requests before it exits, in ms. */
  DRAIN_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
});
export type ApiEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): ApiEnv {
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`invalid environment: ${first?.path.join(".")}: ${first?.message}`);
  }
  return parsed.data;
}
