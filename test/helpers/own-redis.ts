import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRedis, pingRedis } from "@ferry/transport";
import { exited } from "../../scripts/exited.js";
import { freePort } from "../../scripts/free-port.js";

export interface OwnRedis {
  url: string;
  /** Starts the server (again, after `kill`), with what it had before, and `args` besides. */
  start(args?: string[]): Promise<void>;
  /** SIGKILLs the server and waits until it is gone (at once when it is gone already). */
  kill(): Promise<void>;
  /** Sends the server a signal: SIGSTOP freezes it, SIGCONT thaws it. */
  signal(name: NodeJS.Signals): void;
  /** Kills it for good and removes its files. */
  stop(): Promise<void>;
}

/** Ports tried before giving up on finding one no other test's process took meanwhile. */
const ATTEMPTS = 10;

/**
 * A redis-server of a test's own on a free port (the shared one is never stopped), with AOF
 * fsynced on every write, so that what landed before a SIGKILL is there after a restart. A free
 * port is only free until someone binds it: test files run side by side and each takes ports
 * (their own servers, their APIs), so the server answering on the port is checked to be this
 * one (its pid) before it is used, and another port tried when it is not. A test that froze
 * another file's server would otherwise time out every command here.
 */
export async function ownRedis(): Promise<OwnRedis> {
  const dir = mkdtempSync(join(tmpdir(), "ferry-own-redis-"));
  let port = 0;
  let child: ChildProcess | undefined;
  const launch = async (args: string[]): Promise<boolean> => {
    const server = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", ""].concat(
        ["--appendonly", "yes", "--appendfsync", "always"],
        args,
      ),
      { stdio: "ignore" },
    );
    child = server;
    const url = `redis://127.0.0.1:${port}`;
    for (let i = 0; i < 200 && !exited(server); i++) {
      if (await pingRedis(url, 200)) return (await pidAt(url)) === server.pid;
      await sleep(25);
    }
    return false;
  };
  const kill = async () => {
    if (!child || exited(child)) return;
    const gone = new Promise((resolve) => child?.once("exit", resolve));
    child.kill("SIGKILL");
    await gone;
  };
  // a restart keeps its port (clients reconnect to the url): one taken meanwhile is an error
  const start = async (args: string[] = []) => {
    if (!(await launch(args))) {
      await kill();
      throw new Error(`redis-server did not start as this test's own on port ${port}`);
    }
  };
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    if (await launch([])) break;
    await kill();
    if (attempt === ATTEMPTS) throw new Error("no free port kept long enough for a redis-server");
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    kill,
    signal: (name) => {
      if (child && !exited(child)) child.kill(name);
    },
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The pid of the redis-server answering at `url` (INFO server). */
async function pidAt(url: string): Promise<number | undefined> {
  const redis = createRedis(url);
  redis.on("error", () => {});
  try {
    const info = await redis.info("server");
    return Number(/process_id:(\d+)/.exec(info)?.[1]);
  } catch {
    return undefined;
  } finally {
    redis.disconnect();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
