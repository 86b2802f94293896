import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exited } from "./exited.js";
import { throwawayServerArgs } from "./redis-local.js";

export interface LocalCluster {
  /** Seed nodes as REDIS_CLUSTER_NODES wants them: "127.0.0.1:p1,127.0.0.1:p2,...". */
  nodes: string;
  ports: number[];
  /** The ports serving as primaries now (asked of the cluster, so true after a failover). */
  primaries(): number[];
  /** The port of the primary serving `key`'s slot now. */
  primaryFor(key: string): number;
  /** SIGKILLs the node on `port`. */
  kill(port: number): void;
  /**
   * Starts the node on `port` again (as Kubernetes restarts a pod): with its nodes.conf it
   * rejoins, as a replica of whoever took its slots; resolves once it replicates.
   */
  restart(port: number): Promise<void>;
  stop(): void;
}

export interface LocalClusterOptions {
  primaries?: number;
  replicasEach?: number;
  /** How long a primary may not answer before its replica takes over, in ms. */
  nodeTimeoutMs?: number;
}

/**
 * A throwaway Redis Cluster on 127.0.0.1 (Debian's redis-server with `cluster-enabled yes`,
 * joined by `redis-cli --cluster create`), for tests and benches. Nothing is persisted.
 */
export async function startLocalCluster(options: LocalClusterOptions = {}): Promise<LocalCluster> {
  const primaries = options.primaries ?? 3;
  const replicasEach = options.replicasEach ?? 1;
  const count = primaries * (1 + replicasEach);
  const ports = await clusterPorts(count);
  const dir = mkdtempSync(join(tmpdir(), "ferry-cluster-"));
  const children = new Map<number, ChildProcess>();
  const launch = (port: number) => {
    const child = spawn(
      "redis-server",
      [
        ...throwawayServerArgs(port, dir),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        String(options.nodeTimeoutMs ?? 1_500),
      ],
      { stdio: "ignore" },
    );
    children.set(port, child);
  };
  for (const port of ports) launch(port);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    for (const child of children.values()) if (!exited(child)) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", stop);
  try {
    for (const port of ports) await until(() => cli(port, "PING") === "PONG", 5_000);
    execFileSync(
      "redis-cli",
      [
        "--cluster",
        "create",
        ...ports.map((p) => `127.0.0.1:${p}`),
        "--cluster-replicas",
        String(replicasEach),
        "--cluster-yes",
      ],
      { stdio: "ignore" },
    );
    // every node must agree before a client's first slot map is right
    for (const port of ports)
      await until(() => cli(port, "CLUSTER", "INFO").includes("cluster_state:ok"), 20_000);
    await until(() => replicasOnline(ports[0] as number) === primaries * replicasEach, 20_000);
    // and each replica synced (WAIT counts only those): its link to its primary is up
    for (const port of ports)
      await until(() => {
        const info = cli(port, "INFO", "replication");
        return info.includes("role:master") || info.includes("master_link_status:up");
      }, 20_000);
  } catch (err) {
    stop();
    throw err;
  }
  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(","),
    ports,
    primaries: () =>
      ports.filter((p) => isUp(children.get(p)) && cli(p, "ROLE").startsWith("master")),
    primaryFor: (key) => {
      const alive = ports.find((p) => isUp(children.get(p))) ?? 0;
      const slot = Number(cli(alive, "CLUSTER", "KEYSLOT", key));
      for (const line of cli(alive, "CLUSTER", "NODES").split("\n")) {
        const [, address = "", flags = "", , , , , state, ...ranges] = line.split(" ");
        if (!flags.includes("master") || flags.includes("fail") || state !== "connected") continue;
        for (const range of ranges) {
          const [from = -1, to = from] = range.split("-").map(Number);
          if (slot >= from && slot <= to) return Number(address.split(":")[1]?.split("@")[0]);
        }
      }
      throw new Error(`no primary serves ${key}`);
    },
    kill: (port) => children.get(port)?.kill("SIGKILL"),
    restart: async (port) => {
      launch(port);
      await until(() => cli(port, "INFO", "replication").includes("master_link_status:up"), 20_000);
    },
    stop,
  };
}

function cli(port: number, ...args: string[]): string {
  try {
    return execFileSync("redis-cli", ["-p", String(port), ...args], {
      encoding: "utf8",
      timeout: 2_000,
    }).trim();
  } catch {
    return "";
  }
}

/** Replicas the cluster sees connected (a replica answers only once it synced). */
function replicasOnline(port: number): number {
  return cli(port, "CLUSTER", "NODES")
    .split("\n")
    .filter((line) => line.includes(" slave ") && line.includes(" connected")).length;
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("local Redis Cluster did not come up");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Ports for the nodes: each node also listens on port + 10000 (the cluster bus), so ephemeral
 * ports (above 55535) will not do; both of each pair must be free.
 */
async function clusterPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  let port = 20_000 + Math.floor(Math.random() * 9_000);
  while (ports.length < count) {
    if ((await isFree(port)) && (await isFree(port + 10_000))) ports.push(port);
    port++;
  }
  return ports;
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function isUp(child: ChildProcess | undefined): boolean {
  return child !== undefined && !exited(child);
}
