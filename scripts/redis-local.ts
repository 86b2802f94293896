import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseClusterNodes } from "@ferry/protocol";
import { pingRedis } from "@ferry/transport";
import { freePort } from "./free-port.js";

export interface LocalRedis {
  url: string;
  /** Stops the private server, if one was started. */
  stop: () => void;
}

/**
 * The contract's rule: use Redis at `url` when it answers; else start a private redis-server
 * on a free port in a temp dir and say so; else exit 1 with one actionable line.
 */
export async function ensureRedis(url: string): Promise<LocalRedis> {
  // a Redis Cluster is the user's to run: it must answer, and is never replaced by a server
  const clusterNodes = parseClusterNodes(process.env.REDIS_CLUSTER_NODES);
  if (clusterNodes.length > 0) {
    if (await pingRedis({ url, clusterNodes }, 3_000)) return { url, stop: () => {} };
    console.error(
      `ferry: the Redis Cluster at REDIS_CLUSTER_NODES=${clusterNodes.join(",")} does not answer; start it or unset REDIS_CLUSTER_NODES.`,
    );
    process.exit(1);
  }
  if (await pingRedis(url)) return { url, stop: () => {} };
  if (spawnSync("redis-server", ["--version"]).status !== 0) {
    console.error(
      `ferry: no Redis answers at ${url} and redis-server is not on PATH; start Redis or set REDIS_URL.`,
    );
    process.exit(1);
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ferry-redis-"));
  const child: ChildProcess = spawn("redis-server", throwawayServerArgs(port, dir), {
    stdio: "ignore",
  });
  const privateUrl = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100 && !(await pingRedis(privateUrl, 200)); i++) await sleep(50);
  console.log(
    `ferry: no Redis at ${url}; started a private redis-server at ${privateUrl} (stopped on exit)`,
  );
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", stop);
  return { url: privateUrl, stop };
}

/** redis-server arguments of a throwaway server on 127.0.0.1:`port`: nothing persisted. */
export function throwawayServerArgs(port: number, dir: string): string[] {
  return [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
  ];
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
