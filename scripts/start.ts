// `npm start`: the whole local stack (API + one worker) in the foreground; `--only api|worker`
// starts one process alone for scaling out. Ctrl-C drains every child before exiting. A child
// that dies on its own is restarted, so one crash never takes the healthy process down with it;
// one that exits for its configuration (EXIT_CONFIG, having said what to change) stops the stack.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createServer } from "node:net";
import {
  EXIT_CONFIG,
  isListeningMessage,
  ORPHAN_GRACE_MS,
  survivesLostTerminal,
  watchAncestors,
} from "@ferry/protocol";
import { ensureRedis } from "./redis-local.js";

/** A child that dies this many times within RESTART_WINDOW_MS is left down, and the stack stops. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

const onlyAt = process.argv.indexOf("--only");
const only = onlyAt >= 0 ? process.argv[onlyAt + 1] : undefined;
if (only !== undefined && only !== "api" && only !== "worker") {
  console.error("usage: node --import tsx scripts/start.ts [--only api|worker]");
  process.exit(2);
}
const redis = await ensureRedis(
  process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  only && `npm run ${only}`,
);
const env = { ...process.env, REDIS_URL: redis.url };
const entries = { api: "apps/api/src/main.ts", worker: "apps/worker/src/main.ts" };
type Name = keyof typeof entries;
const names: Name[] = only ? [only] : ["worker", "api"];

const running = new Map<Name, ChildProcess>();
const deaths = new Map<Name, number[]>();
let exitCode = 0;
/** When the stack began to stop (a signal, or a child that cannot run); undefined while it runs. */
let stoppingSince: number | undefined;
let done: () => void = () => {};
const allExited = new Promise<void>((resolve) => {
  done = resolve;
});

function launch(name: Name): void {
  const child = spawn(
    process.execPath,
    ["--conditions=ferry-source", "--import", "tsx", entries[name]],
    // the IPC channel is how a child sees this process die, even by SIGKILL (exitWithParent);
    // a process group of its own, so that the terminal's Ctrl-C reaches this process alone and
    // the stack stops in order (stopAll)
    { stdio: ["inherit", "inherit", "inherit", "ipc"], env, detached: true },
  );
  running.set(name, child);
  if (name === "api")
    child.on("message", (message) => {
      if (isListeningMessage(message)) void sayUp(message.port);
    });
  child.on("exit", (code, signal) => {
    running.delete(name);
    if (stoppingSince !== undefined) {
      if (code && exitCode === 0) exitCode = code;
      if (running.size === 0) done();
      return;
    }
    // it said what to change; started again, it would fail the same way
    if (code === EXIT_CONFIG) {
      exitCode = 1;
      stopAll("SIGTERM");
      return;
    }
    const now = Date.now();
    const recent = [...(deaths.get(name) ?? []), now].filter((t) => now - t < RESTART_WINDOW_MS);
    deaths.set(name, recent);
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (recent.length > MAX_RESTARTS) {
      console.error(
        `ferry: the ${name} died ${recent.length} times in a minute (${how}); stopping`,
      );
      exitCode = code || 1;
      stopAll("SIGTERM");
      if (running.size === 0) done();
      return;
    }
    console.error(`ferry: the ${name} exited (${how}); restarting it`);
    setTimeout(() => stoppingSince === undefined && launch(name), 500 * recent.length);
  });
}

/**
 * Stops the stack in order: the API first, which drains what it accepted while the worker still
 * serves it (a request still queued when both stopped at once was never answered), then the
 * worker, which drains what it runs.
 */
function stopAll(signal: NodeJS.Signals): void {
  if (stoppingSince !== undefined) return;
  stoppingSince = performance.now();
  const api = running.get("api");
  const worker = running.get("worker");
  if (api && worker) {
    api.once("exit", () => worker.kill(signal));
    api.kill(signal);
  } else for (const child of running.values()) child.kill(signal);
  if (running.size === 0) done();
}

/**
 * One Ctrl-C arrives more than once: the terminal signals the whole process group and npm
 * forwards what it got to its child, milliseconds apart. A signal this soon after the stop
 * began is that same one.
 */
const SAME_SIGNAL_MS = 1_000;

/**
 * Ctrl-C drains; a second one, while the drain is still running (a worker finishing a long
 * generation, or waiting on a Redis that went away), stops everything at once, as a user who
 * presses it twice means.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (stoppingSince === undefined) {
    stopAll(signal);
    return;
  }
  if (performance.now() - stoppingSince < SAME_SIGNAL_MS) return;
  // the second Ctrl-C arrives twice too (the terminal's, then npm's): said once
  if (exitCode !== 130) console.error("ferry: stopping now, without waiting for the drain");
  exitCode = 130;
  for (const child of running.values()) child.kill("SIGKILL");
}

/**
 * The processes whose end is this stack's end: its parent (npm, whose scripts `exec` this
 * one), and npm's own process when something runs this script under a shell of npm's
 * (`sh -c` without `exec`), which a `kill -9` of npm leaves running.
 */
function ancestors(): number[] {
  const pids = [process.ppid];
  if (process.env.npm_lifecycle_event === undefined) return pids;
  try {
    const [ppid, command] = execFileSync("ps", ["-o", "ppid=,comm=", "-p", String(process.ppid)])
      .toString()
      .trim()
      .split(/\s+/);
    if (/^(ba|da|z)?sh$/.test(command ?? "") && Number(ppid) > 1) pids.push(Number(ppid));
  } catch {
    // no ps: the parent alone is watched
  }
  return pids;
}

/**
 * A parent gone without a signal (kill -9, a closed CI job): nothing may outlive it. One that
 * went with a signal this process got too (a closed terminal hangs up npm and this script at
 * once) leaves that signal's drain to run: the children still have this process to answer to,
 * and their drain is bounded (DRAIN_TIMEOUT_MS).
 */
function onOrphaned(): void {
  // the hang-up that ended the parent may be this process's next event (timers run before
  // signals in a turn): it is given that turn to arrive
  setTimeout(() => {
    if (stoppingSince === undefined) stopOrphaned();
  }, 50);
}

function stopOrphaned(): void {
  if (stoppingSince !== undefined) return;
  console.error("ferry: the process that ran npm start is gone; stopping");
  stoppingSince = performance.now();
  // each child ends as it would had this process died too (exitWithParent): its port closed
  // at once, without the moment a signal's drain gives requests still on their way (a second
  // the port stayed bound, 3.2 s in all on a busy machine), its drain within ORPHAN_GRACE_MS
  for (const child of running.values()) if (child.connected) child.disconnect();
  if (running.size === 0) done();
  // no one is left to wait for a drain, and the port must be free for the next start
  setTimeout(() => {
    for (const child of running.values()) child.kill("SIGKILL");
  }, ORPHAN_GRACE_MS - 500).unref();
}

/** The port the stack has said it listens on (a restarted API on the same one says nothing). */
let announced: number | undefined;
/** The models this stack's worker loads: WORKER_MODELS, or every model when it is unset. */
const workerModels = (process.env.WORKER_MODELS ?? "")
  .split(",")
  .map((name) => name.trim())
  .filter(Boolean);

/**
 * One plain line once this stack's API has bound its port (its own logs are JSON; it says so
 * itself, as something else answering on the port does not): where to point a browser or a
 * client. Then, when the worker's models are still loading, which, and a line once they serve:
 * requests to them wait meanwhile.
 */
async function sayUp(port: number): Promise<void> {
  // PORT=0: a restarted API listens elsewhere, and the line said before is stale
  if (announced === port) return;
  const first = announced === undefined;
  announced = port;
  // the API's own default host (apps/api/src/env.ts); a wildcard address is reached on loopback
  const bound = process.env.HOST || "127.0.0.1";
  const host = bound === "0.0.0.0" || bound === "::" ? "127.0.0.1" : bound;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  console.error(`ferry: up at ${url} (playground ${url}/, API reference ${url}/docs)`);
  if (!first || !names.includes("worker")) return;
  let said = false;
  for (let tries = 0; tries < 1_200 && stoppingSince === undefined; tries++) {
    const loading = await modelsLoading(url);
    if (loading?.length === 0) {
      if (said) console.error("ferry: every model is loaded");
      return;
    }
    if (loading && !said) {
      console.error(`ferry: still loading ${loading.join(", ")}; requests to them wait for it`);
      said = true;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The worker's models not serving yet, from the API's /health; undefined when it cannot say. */
async function modelsLoading(url: string): Promise<string[] | undefined> {
  try {
    const health = (await (await fetch(`${url}/health`)).json()) as {
      models?: Record<string, { ready: boolean }>;
    };
    if (!health.models) return undefined;
    return Object.entries(health.models)
      .filter(([name, m]) => !m.ready && (workerModels.length === 0 || workerModels.includes(name)))
      .map(([name]) => name);
  } catch {
    return undefined;
  }
}

/**
 * The API's address when something already listens there, asked before anything starts: found
 * by the API itself, the worker had started first and loaded its models, taking jobs on the
 * Redis that stack may share, for seconds before the stack stopped. A PORT the API would
 * refuse (or 0, any port) is left to it to say.
 */
function apiPortTaken(): Promise<string | undefined> {
  const port = Number(process.env.PORT || 8000);
  // the API's own default host (apps/api/src/env.ts)
  const host = process.env.HOST || "127.0.0.1";
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) =>
      resolve(err.code === "EADDRINUSE" ? `${host}:${port}` : undefined),
    );
    probe.listen(port, host, () => probe.close(() => resolve(undefined)));
  });
}

process.on("SIGINT", () => onSignal("SIGINT"));
process.on("SIGTERM", () => onSignal("SIGTERM"));
// a closed terminal (or a dropped ssh session) hangs up this process group, not the children's:
// the same ordered drain as Ctrl-C, where Node's default would end this process at once and
// leave the children to the orphans' two seconds
process.on("SIGHUP", () => {
  // never the "press twice" of onSignal: no one is left at a closed terminal to mean it
  if (stoppingSince === undefined) stopAll("SIGTERM");
});
survivesLostTerminal();
watchAncestors(ancestors(), onOrphaned);
const taken = names.includes("api") ? await apiPortTaken() : undefined;
if (taken) {
  console.error(
    `ferry: ${taken} is already in use: stop what listens there, or set PORT to a free port`,
  );
  await redis.stop();
  process.exit(1);
}
for (const name of names) launch(name);
await allExited;
await redis.stop();
process.exit(exitCode);
