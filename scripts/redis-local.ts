import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseClusterNodes } from "@ferry/protocol";
import { pingRedis, probeRedis } from "@ferry/transport";
import { freePort } from "./free-port.js";

export interface LocalRedis {
  url: string;
  /** Stops the private server, if one was started; resolves once it is gone (5 s at most). */
  stop: () => Promise<void>;
}

/**
 * The contract's rule: use Redis at `url` when it answers; else, when nothing is there, start
 * a private redis-server on a free port in a temp dir and say so; else (a server that refuses
 * Ferry, or no redis-server to start) exit 1 with one actionable line. `alone` names a process
 * started as one part of a deployment (`npm run api`, `npm run worker`): it never starts a
 * private Redis, which no other part would find (an API and a worker each on its own had
 * served nothing: every predict 504).
 */
export async function ensureRedis(url: string, alone?: string): Promise<LocalRedis> {
  // a Redis Cluster is the user's to run: it must answer, and is never replaced by a server
  const clusterNodes = parseClusterNodes(process.env.REDIS_CLUSTER_NODES);
  if (clusterNodes.length > 0) {
    if (await pingRedis({ url, clusterNodes }, 3_000)) return { url, stop: async () => {} };
    console.error(
      `ferry: the Redis Cluster at REDIS_CLUSTER_NODES=${clusterNodes.join(",")} does not answer; start it or unset REDIS_CLUSTER_NODES.`,
    );
    process.exit(1);
  }
  const probe = await probeRedis(url);
  if (probe.state === "up") return { url, stop: async () => {} };
  // a server is there: it is the user's, and a private one beside it would hide the mistake
  if (probe.state === "refused") {
    const reason = probe.reason.replace(/\.$/, "");
    const fix = /NOAUTH|WRONGPASS|invalid password/i.test(reason)
      ? "put its password in REDIS_URL (redis://:password@host:port)"
      : "fix what it says";
    console.error(
      `ferry: the Redis at ${shown(url)} refused: ${reason}; ${fix}, or point REDIS_URL at another Redis.`,
    );
    process.exit(1);
  }
  if (alone !== undefined) {
    console.error(
      `ferry: no Redis answers at ${shown(url)}; ${alone} is one part of a deployment, and every part must use the same Redis: start one there or set REDIS_URL (npm start runs the whole stack on a private one).`,
    );
    process.exit(1);
  }
  if (spawnSync("redis-server", ["--version"]).status !== 0) {
    console.error(
      `ferry: no Redis answers at ${shown(url)} and redis-server is not on PATH; start Redis or set REDIS_URL.`,
    );
    process.exit(1);
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ferry-redis-"));
  // a process group of its own: Ctrl-C reaches the terminal's whole foreground group, and
  // Redis must outlive the drain it starts (the API and the workers finish on it, then it is
  // stopped); in the group, it shut down first, and the workers' drain waited on it forever.
  // Out of the group, a SIGKILL of it (kill -9, an OOM kill, a CI timeout) no longer took
  // Redis along: the watch below does.
  const child: ChildProcess = spawn(
    "sh",
    ["-c", WATCHED, "ferry-redis", String(process.pid), dir, ...throwawayServerArgs(port, dir)],
    { stdio: "ignore", detached: true },
  );
  const privateUrl = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100 && !(await pingRedis(privateUrl, 200)); i++) await sleep(50);
  console.log(
    `ferry: no Redis at ${shown(url)}; started a private redis-server at ${privateUrl} (stopped on exit)`,
  );
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stopped = false;
  const kill = () => {
    if (stopped) return;
    stopped = true;
    try {
      // the group: the watch (which removes the dir once the server is gone) and the server
      process.kill(-(child.pid as number), "SIGTERM");
    } catch {
      // already gone
    }
  };
  const stop = async () => {
    kill();
    await Promise.race([gone, sleep(5_000)]);
  };
  // an exit without `stop` (process.exit on an error) still takes it along
  process.on("exit", kill);
  return { url: privateUrl, stop };
}

/**
 * Runs redis-server (its arguments after the owner's pid and the server's temp dir) and, once
 * it stops, removes the dir: stopped by a SIGTERM to the group (the owner's `stop`), or by this
 * watch once the owner is gone, looked for every second (an owner that died without `stop`).
 */
const WATCHED = `owner=$1; dir=$2; shift 2
redis-server "$@" & server=$!
trap 'kill $server 2>/dev/null; wait $server; rm -rf "$dir"; exit 0' TERM
while kill -0 "$owner" 2>/dev/null && kill -0 "$server" 2>/dev/null; do sleep 1; done
kill $server 2>/dev/null; wait $server; rm -rf "$dir"`;

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

/** A Redis URL as printed: its password left out. */
function shown(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
