import { deploymentEnvSchema, parseEnv } from "@ferry/protocol";
import { z } from "zod";

const envSchema = deploymentEnvSchema.extend({
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
  /** How long a draining API waits for open requests before it exits, in ms. */
  DRAIN_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
});
export type ApiEnv = z.infer<typeof envSchema>;

export function loadEnv(source: NodeJS.ProcessEnv = process.env): ApiEnv {
  return parseEnv(envSchema, source);
}
