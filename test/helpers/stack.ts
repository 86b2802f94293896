import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { parseClusterNodes } from "@ferry/protocol";
import { deletePrefix, type RedisTarget } from "@ferry/transport";
import { exited } from "../../scripts/exited.js";
import { freePort } from "../../scripts/free-port.js";

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
/** The deployment's Redis as the environment names it: a cluster when REDIS_CLUSTER_NODES is set. */
export const REDIS_TARGET: RedisTarget = {
  url: REDIS_URL,
  clusterNodes: parseClusterNodes(process.env.REDIS_CLUSTER_NODES),
};

export interface Proc {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
  /** A worker's own /metrics, when it was started with a health port. */
  metricsUrl?: string;
}

export interface BatchStatus {
  status: string;
  total: number;
  succeeded: number;
  failed: number;
}

export interface StackOptions {
  /** The Redis (or Redis Cluster) every process uses. @defaultValue REDIS_TARGET */
  redis?: RedisTarget;
  /** Workers to start at once. @defaultValue 1 */
  workers?: number;
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /** Extra environment for the API only. */
  apiEnv?: Record<string, string>;
  /** Extra environment for workers only. */
  workerEnv?: Record<string, string>;
  /** Extra node flags (--cpu-prof, say) for the API and for workers. */
  apiNodeArgs?: string[];
  workerNodeArgs?: string[];
  /** The checkout its processes run from (a bench's baseline worktree). @defaultValue this one */
  root?: string;
}

/**
 * The real API and workers as child processes on free ports, under a key prefix of their own
 * so that test files can share one Redis side by side.
 */
/** Stacks started and not yet stopped: what an interrupted bench stops (`stopAll`). */
const live = new Set<Stack>();
/** Set by `stopAll`: no stack may start a process any more (a section still running). */
let stopping = false;

/** Stops every stack still running (children killed, keys deleted): for a SIGINT's handler. */
export async function stopAll(): Promise<void> {
  stopping = true;
  await Promise.allSettled([...live].map((stack) => stack.stop()));
}

export class Stack {
  /** Its Redis keys' prefix: a run of its own (FERRY_STACK_PREFIX names a set of runs). */
  readonly prefix =
    `${process.env.FERRY_STACK_PREFIX ?? "ferry-test"}-${randomBytes(4).toString("hex")}`;
  readonly workers: Proc[] = [];
  /** Every process it started, ready or still starting: what `stop` kills. */
  private readonly started = new Set<Proc>();
  /** API replicas besides `api` (`startApiReplica`). */
  readonly replicas: Proc[] = [];
  api!: Proc;
  baseUrl = "";

  constructor(private readonly options: StackOptions = {}) {}

  /** The deployment's Redis: as given, else a file's own server (env REDIS_URL), else the test run's. */
  private get redis(): RedisTarget {
    const own = this.options.env?.REDIS_URL;
    return this.options.redis ?? (own ? { url: own } : REDIS_TARGET);
  }

  private env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      ...process.env,
      REDIS_URL: this.redis.url,
      REDIS_CLUSTER_NODES: (this.redis.clusterNodes ?? []).join(","),
      FERRY_PREFIX: this.prefix,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "warn",
      ...this.options.env,
      ...extra,
    };
  }

  async start(): Promise<this> {
    live.add(this);
    await this.startApi();
    for (let i = 0; i < (this.options.workers ?? 1); i++) await this.startWorker();
    return this;
  }

  async startApi(extra: Record<string, string> = {}): Promise<Proc> {
    const { proc, url } = await this.launchApi(extra);
    this.baseUrl = url;
    this.api = proc;
    return proc;
  }

  /** Another API replica on this stack's Redis and prefix, as a second pod behind a Service. */
  async startApiReplica(extra: Record<string, string> = {}): Promise<{ proc: Proc; url: string }> {
    const replica = await this.launchApi(extra);
    this.replicas.push(replica.proc);
    return replica;
  }

  /** An API process on a free port, once its readiness probe answers. */
  private async launchApi(
    extra: Record<string, string> = {},
  ): Promise<{ proc: Proc; url: string }> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = this.env({ PORT: String(port), ...this.options.apiEnv, ...extra });
    const proc = this.spawn("apps/api/src/main.ts", env, this.options.apiNodeArgs);
    await waitFor(async () => (await fetch(`${url}/v2/health/ready`)).status === 200, 30_000, proc);
    return { proc, url };
  }

  /** Starts a worker and waits until its own readiness probe says it consumes its queues. */
  async startWorker(extra: Record<string, string> = {}): Promise<Proc> {
    const port = extra.WORKER_PORT ?? String(await freePort());
    const proc = this.launchWorker({ ...extra, WORKER_PORT: port });
    proc.metricsUrl = `http://127.0.0.1:${port}/metrics`;
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${port}/health/ready`)).status === 200,
      60_000,
      proc,
    );
    return proc;
  }

  /** Starts a worker without waiting for it (for when the API is draining, say). */
  launchWorker(extra: Record<string, string> = {}): Proc {
    const env = this.env({ ...this.options.workerEnv, ...extra });
    const proc = this.spawn("apps/worker/src/main.ts", env, this.options.workerNodeArgs);
    this.workers.push(proc);
    return proc;
  }

  url(path: string): string {
    return `${this.baseUrl}${path}`;
  }

  async post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(this.url(path), {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  }

  /** A batch's status, as GET /v1/batches/{id} reports it. */
  async batchStatus(id: string): Promise<BatchStatus> {
    return (await (await fetch(this.url(`/v1/batches/${id}`))).json()) as BatchStatus;
  }

  /** Waits until a batch has completed. */
  async batchCompleted(id: string, timeoutMs: number): Promise<void> {
    await waitFor(async () => (await this.batchStatus(id)).status === "completed", timeoutMs);
  }

  /** A process of this stack, killed by `stop` even if it never became ready. */
  private spawn(entry: string, env: NodeJS.ProcessEnv, nodeArgs?: string[]): Proc {
    if (stopping) throw new Error("stopping every stack: nothing new starts");
    live.add(this);
    const proc = launch(entry, env, nodeArgs, this.options.root);
    this.started.add(proc);
    return proc;
  }

  async stop(): Promise<void> {
    live.delete(this);
    const all = [...this.started];
    for (const p of all) if (!exited(p.child)) p.child.kill("SIGKILL");
    await Promise.all(all.map((p) => p.exited));
    await deletePrefix(this.redis, this.prefix);
  }
}

export function launch(
  entry: string,
  env: NodeJS.ProcessEnv,
  nodeArgs: string[] = [],
  cwd?: string,
): Proc {
  const child = spawn(
    process.execPath,
    [...nodeArgs, "--conditions=ferry-source", "--import", "tsx", entry],
    {
      env,
      ...(cwd ? { cwd } : {}),
      // the IPC channel is the child's watch on this process (`exitWithParent`): a test run or
      // bench that dies, however, takes its stacks with it rather than leaving them serving
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    },
  );
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output, exited };
}

/** Polls `check` until it holds; fails with the process's output when the process dies first. */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  proc?: Proc,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc && exited(proc.child)) {
      const how = proc.child.signalCode ?? proc.child.exitCode;
      throw new Error(`process exited with ${how}:\n${proc.output.join("")}`);
    }
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms${proc ? `:\n${proc.output.join("")}` : ""}`);
}
