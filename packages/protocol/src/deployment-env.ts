import { z } from "zod";

/**
 * Environment every process of one deployment reads alike: the API and the workers must agree
 * on where Redis is, the key prefix, the model repository and how long job logs live, so the
 * defaults are written once.
 */
export const deploymentEnvSchema = z.object({
  REDIS_URL: z.string().default("redis://127.0.0.1:6379"),
  /**
   * Seed nodes of a Redis Cluster, "host:port,host:port": set, every process uses the cluster
   * (REDIS_URL then only lends its credentials and TLS); unset, the one Redis at REDIS_URL.
   */
  REDIS_CLUSTER_NODES: z.string().default("").transform(parseClusterNodes),
  /** Prefix of every Redis key; API and workers of one deployment share it. */
  FERRY_PREFIX: z.string().default("ferry"),
  MODEL_REPOSITORY: z.string().default("./models"),
  LOG_LEVEL: z.string().default("info"),
  /** How long finished async jobs, their event logs and batch results stay readable, in s. */
  JOB_TTL_S: z.coerce.number().int().positive().default(86_400),
});

/** `REDIS_CLUSTER_NODES` ("host:port,host:port") as a list; empty when unset. */
export function parseClusterNodes(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((node) => node.trim())
    .filter((node) => node !== "");
}

/** Reads an environment against a schema; a bad value fails naming the variable. */
export function parseEnv<S extends z.ZodType>(
  schema: S,
  source: NodeJS.ProcessEnv = process.env,
): z.infer<S> {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`invalid environment: ${first?.path.join(".")}: ${first?.message}`);
  }
  return parsed.data;
}
