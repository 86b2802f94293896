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
  /**
   * pino's level names, in any case: checked here, because pino throws on an unknown one only
   * once the process builds its logger, and `npm start` restarted that crash again and again.
   */
  LOG_LEVEL: z
    .string()
    .default("info")
    .transform((level) => level.trim().toLowerCase())
    .pipe(z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])),
  /** How long finished async jobs, their event logs and batch results stay readable, in s. */
  JOB_TTL_S: z.coerce.number().int().positive().default(86_400),
  /**
   * How long a draining process (SIGTERM, Ctrl-C) waits for the work it holds (an API its open
   * requests and streams, a worker its running jobs) before it exits anyway, in ms; what a
   * worker still runs is then handed to another as a stalled job. Under Kubernetes' termination
   * grace (120 s in infra/), so that the process says what it left itself.
   */
  DRAIN_TIMEOUT_MS: z.coerce.number().int().positive().default(100_000),
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

/**
 * The exit status of a process whose configuration cannot work (an invalid environment
 * variable, a model repository it cannot read, a port already taken): sysexits' EX_CONFIG.
 * `npm start` restarts a process that crashed, never one that exits so: started again, it
 * would fail the same way.
 */
export const EXIT_CONFIG = 78;

/** Ends the process with one line that says what to change, instead of a stack trace. */
export function exitForConfig(message: string): never {
  process.stderr.write(`ferry: ${message}\n`);
  process.exit(EXIT_CONFIG);
}

/** `load()`'s result; its error (an invalid environment) ends the process as `exitForConfig`. */
export function configured<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    return exitForConfig(messageOf(err));
  }
}

/** An error's message, as one line says it. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
