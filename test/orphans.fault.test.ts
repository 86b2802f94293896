import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { connect } from "node:net";
import { pingRedis } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { freePort } from "../scripts/free-port.js";
import { waitFor } from "./helpers/stack.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every process below `root`, read from ps. */
function descendants(root: number): number[] {
  const table = execFileSync("ps", ["-eo", "pid=,ppid="])
    .toString()
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number));
  const found: number[] = [];
  const frontier = [root];
  for (let pid = frontier.pop(); pid !== undefined; pid = frontier.pop()) {
    for (const [child, parent] of table)
      if (parent === pid && child !== undefined) {
        found.push(child);
        frontier.push(child);
      }
  }
  return found;
}

/** Whether `pid` runs (a zombie, ended but not yet reaped by whoever adopted it, does not). */
function running(pid: number): boolean {
  try {
    return !execFileSync("ps", ["-o", "stat=", "-p", String(pid)])
      .toString()
      .startsWith("Z");
  } catch {
    return false;
  }
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** A run's cleanup: what it started, then `child` itself, each killed outright. */
async function killLeft(child: ChildProcess, left: number[]): Promise<void> {
  for (const pid of [child.pid as number, ...left])
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  if (!exited(child)) await new Promise((r) => child.once("exit", r));
}

/**
 * `command` (npm start, or what runs it) on `port` with a private Redis of its own (nothing
 * answers at its REDIS_URL) and `models` on its worker, in a process group of its own; its
 * output as it comes.
 */
async function startOnPort(command: string, args: string[], port: number, models: string) {
  const child = spawn(command, args, {
    env: {
      ...process.env,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      PORT: String(port),
      WORKER_MODELS: models,
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const chunks: string[] = [];
  child.stdout?.on("data", (d: Buffer) => chunks.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => chunks.push(d.toString()));
  return { child, output: () => chunks.join("") };
}

/**
 * `npm start` as a user runs it, on a free port with its private Redis, until the API and the
 * worker serve; then `victim` picks the process to kill -9 (npm itself, or the node process
 * running scripts/start.ts under it), and nothing it started may be left 3 s later.
 */
async function killAndLook(victim: (npm: number) => number): Promise<void> {
  const port = await freePort();
  const { child: npm, output } = await startOnPort("npm", ["start"], port, "digits");
  let left: number[] = [];
  let privateUrl: string | undefined;
  try {
    await waitFor(
      async () =>
        /"worker ready"/.test(output()) &&
        (await fetch(`http://127.0.0.1:${port}/v2/health/ready`)).ok,
      60_000,
    );
    privateUrl = /started a private redis-server at (redis:\/\/[\d.:]+)/.exec(output())?.[1];
    expect(privateUrl).toBeDefined();
    left = descendants(npm.pid as number);
    // below npm: start.ts (its script `exec`s), the API, the worker, the Redis watch and its
    // server
    expect(left.length).toBeGreaterThanOrEqual(5);
    process.kill(victim(npm.pid as number), "SIGKILL");
    await sleep(3_000);
    expect(await listening(port)).toBe(false);
    expect(left.filter(running)).toEqual([]);
    expect(await pingRedis(privateUrl as string, 500)).toBe(false);
  } finally {
    await killLeft(npm, left);
  }
}

/** The node process running scripts/start.ts below `npm`. */
function startScript(npm: number): number {
  const line = execFileSync("ps", ["-eo", "pid=,args="])
    .toString()
    .split("\n")
    .find(
      (l) =>
        l.includes("scripts/start.ts") && descendants(npm).includes(Number(l.trim().split(" ")[0])),
    );
  return Number(line?.trim().split(" ")[0]);
}

describe("a kill -9 of npm start leaves nothing running", () => {
  it("of npm itself: start.ts, the API, the worker and the private Redis exit, the port is free", async () => {
    await killAndLook((npm) => npm);
  }, 90_000);

  it("of the node process running start.ts: the API, the worker and the private Redis exit", async () => {
    await killAndLook(startScript);
  }, 90_000);
});

/**
 * `npm start` (through `command`) serving long completions, then `command`'s process sent
 * SIGTERM: every completion must be answered whole, and nothing left running.
 */
async function stopDuringCompletions(
  command: string,
  args: string[],
  completions: number,
  signal: NodeJS.Signals = "SIGTERM",
  /** `command` outlives the drain (npm waits for its script), rather than ending at once. */
  waitsForDrain = false,
): Promise<void> {
  const port = await freePort();
  const { child: top, output } = await startOnPort(command, args, port, "tiny-lm");
  let left: number[] = [];
  try {
    await waitFor(
      async () =>
        /"worker ready"/.test(output()) &&
        (await fetch(`http://127.0.0.1:${port}/v2/models/tiny-lm/ready`)).ok,
      60_000,
    );
    const privateUrl = /started a private redis-server at (redis:\/\/[\d.:]+)/.exec(output())?.[1];
    left = descendants(top.pid as number);
    const answers = Array.from({ length: completions }, (_, k) =>
      fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "tiny-lm",
          prompt: `Once upon a time ${k}`,
          max_tokens: 200,
          ignore_eos: true,
        }),
      }).then(
        async (res) => ({ status: res.status, body: (await res.json()) as CompletionBody }),
        (err: unknown) => ({ status: 0, body: { error: String(err) } as CompletionBody }),
      ),
    );
    // accepted by then, the most of them waiting for one of tiny-lm's 16 seats
    await sleep(1_000);
    let topExited: number | undefined;
    top.once("exit", () => {
      topExited = performance.now();
    });
    process.kill(top.pid as number, signal);
    const ends = await Promise.all(answers);
    const answered = performance.now();
    expect(ends.map((a) => a.status)).toEqual(ends.map(() => 200));
    for (const { body } of ends) expect(body.usage?.completion_tokens).toBe(200);
    await waitFor(
      async () => !(await listening(port)) && left.filter(running).length === 0,
      20_000,
    );
    expect(await pingRedis(privateUrl as string, 500)).toBe(false);
    if (waitsForDrain) {
      await waitFor(async () => topExited !== undefined, 10_000);
      expect(topExited as number).toBeGreaterThanOrEqual(answered);
    }
  } finally {
    await killLeft(top, left);
  }
}

describe("a terminal closed under npm start", () => {
  // Node's default for SIGHUP ended start.ts at once, and the API and the worker, orphaned, cut
  // their drain after two seconds: the completions still running got an empty reply
  it("drains as Ctrl-C does: every accepted completion answered whole, then nothing left running", async () => {
    // util-linux `script` holds the pty; ending it closes the terminal, and the kernel hangs
    // up its foreground process group
    await stopDuringCompletions("script", ["-qfec", "npm start", "/dev/null"], 64);
  }, 120_000);
});

describe("a signal to npm start's pid alone (a script's or a supervisor's stop)", () => {
  // npm forwards it to the script's shell, which died of it without passing it on: start.ts,
  // orphaned, stopped its children in two seconds, and 11-14 of 16 streams were cut
  for (const signal of ["SIGTERM", "SIGINT"] as const)
    it(`${signal}: drains as Ctrl-C does, every accepted completion answered whole, npm exits after, nothing left running`, async () => {
      await stopDuringCompletions("npm", ["start"], 32, signal, true);
    }, 120_000);
});

interface CompletionBody {
  usage?: { completion_tokens: number };
  error?: unknown;
}

describe("a parent that dies while the API still starts", () => {
  it("takes the API along even while it waits for a Redis that never answers", async () => {
    const closed = await freePort();
    // a parent as scripts/start.ts is one: the API its child, with an IPC channel
    const parent = spawn(
      process.execPath,
      [
        "-e",
        `const c = require("node:child_process").spawn(process.execPath, ["--conditions=ferry-source", "--import", "tsx", "apps/api/src/main.ts"], { stdio: ["ignore", "ignore", "ignore", "ipc"], env: { ...process.env, REDIS_URL: "redis://127.0.0.1:${closed}", PORT: "0", LOG_LEVEL: "silent" } }); console.log(c.pid); setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let api = 0;
    parent.stdout?.on("data", (d: Buffer) => {
      api ||= Number(d.toString().trim());
    });
    try {
      await waitFor(async () => api > 0 && running(api), 10_000);
      // it has loaded and waits for Redis (nothing listens on that port)
      await sleep(2_000);
      expect(running(api)).toBe(true);
      parent.kill("SIGKILL");
      await waitFor(async () => !running(api), 5_000);
    } finally {
      if (!exited(parent)) parent.kill("SIGKILL");
      if (api > 0 && running(api)) process.kill(api, "SIGKILL");
    }
  }, 30_000);
});
