import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pingRedis } from "@ferry/transport";
import { freePort } from "../../scripts/free-port.js";

export interface OwnRedis {
  url: string;
  /** Starts the server (again, after `kill`), with what it had before, and `args` besides. */
  start(args?: string[]): Promise<void>;
  /** SIGKILLs the server and waits until it is gone. */
  kill(): Promise<void>;
  /** Kills it for good and removes its files. */
  stop(): Promise<void>;
}

/**
 * A redis-server of a test's own on a free port (the shared one is never stopped), with AOF
 * fsynced on every write, so that what landed before a SIGKILL is there after the restart.
 */
export async function ownRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ferry-own-redis-"));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async (args: string[] = []) => {
    child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", ""].concat(
        ["--appendonly", "yes", "--appendfsync", "always"],
        args,
      ),
      { stdio: "ignore" },
    );
    for (let i = 0; i < 200 && !(await pingRedis(url, 200)); i++) await sleep(25);
  };
  const kill = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child?.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  };
  const stop = async () => {
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };
  await start();
  return { url, start, kill, stop };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
