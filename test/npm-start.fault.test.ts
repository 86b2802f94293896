import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { deletePrefix, pingRedis, probeRedis } from "@ferry/transport";
import { afterAll, describe, expect, it } from "vitest";
import { exited } from "../scripts/exited.js";
import { freePort } from "../scripts/free-port.js";
import { samples } from "./helpers/samples.js";
import { readCompletion } from "./helpers/sse.js";
import { REDIS_TARGET, REDIS_URL, waitFor } from "./helpers/stack.js";

// `npm start` as a user runs it: its children, its private Redis, Ctrl-C and kill -9 (the
// stack's own drain and shutdown: shutdown.fault.test.ts). Each case's keys live under a
// prefix of this file's, gone after it.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const base = `ferry-test-${randomBytes(4).toString("hex")}`;
afterAll(() => deletePrefix(REDIS_URL, base));

/**
 * `npm start`'s script with `env` over this process's, what it prints gathered; `detached`
 * gives it a process group of its own, as a terminal's foreground job has (Ctrl-C signals
 * the whole group).
 */
function npmStart(env: Record<string, string>, detached = false, args: string[] = []) {
  const child = spawn(
    process.execPath,
    ["--conditions=ferry-source", "--import", "tsx", "scripts/start.ts", ...args],
    { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached },
  );
  const chunks: string[] = [];
  child.stdout?.on("data", (d: Buffer) => chunks.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => chunks.push(d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, output: () => chunks.join(""), exit };
}

/** Runs it to its exit; one still running after `limitMs` (it served) gets SIGINT. */
async function npmStartToExit(env: Record<string, string>, limitMs = 30_000, args: string[] = []) {
  const start = npmStart(env, false, args);
  const timer = setTimeout(() => start.child.kill("SIGINT"), limitMs);
  const code = await start.exit;
  clearTimeout(timer);
  return { code, output: start.output() };
}

/**
 * A failed run's cleanup: its npm start's process group, then its private Redis, which a
 * group of its own keeps out of the SIGKILL (its watch stops it within a second; a failed
 * run may be one where it did not).
 */
async function killWithPrivateRedis(
  start: ReturnType<typeof npmStart>["child"],
  exit: Promise<unknown>,
  privateUrl: string | undefined,
): Promise<void> {
  if (!exited(start)) process.kill(-(start.pid as number), "SIGKILL");
  await exit;
  if (privateUrl && (await pingRedis(privateUrl, 500)))
    execFileSync("redis-cli", ["-u", privateUrl, "shutdown", "nosave"]);
}

/** The pid of the child of `parent` that runs `entry` (the API's or the worker's main.ts). */
function childPid(parent: number, entry: string): number {
  const line = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(parent)])
    .toString()
    .split("\n")
    .find((c) => c.includes(entry));
  return Number(line?.trim().split(" ")[0]);
}

describe("npm start", () => {
  it("a worker killed with -9 is restarted; the API keeps serving", async () => {
    const port = await freePort();
    const prefix = `${base}-start`;
    const {
      child: start,
      output,
      exit,
    } = npmStart({
      REDIS_URL,
      FERRY_PREFIX: prefix,
      PORT: String(port),
      WORKER_MODELS: "digits",
      LOG_LEVEL: "warn",
    });
    const url = `http://127.0.0.1:${port}`;
    const predict = () =>
      fetch(`${url}/v1/models/digits/predict`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "X-Timeout-Ms": "20000",
          "Cache-Control": "no-cache",
        },
        body: JSON.stringify({ features: samples.digits.inputs[5] }),
      });
    try {
      await waitFor(async () => (await predict()).status === 200, 60_000);
      const apiPid = childPid(start.pid as number, "api/src/main.ts");
      process.kill(childPid(start.pid as number, "worker/src/main.ts"), "SIGKILL");
      await waitFor(async () => /the worker exited \(signal SIGKILL\)/.test(output()), 5_000);
      const after = await predict(); // waits in the queue for the restarted worker
      expect(after.status).toBe(200);
      expect(exited(start)).toBe(false);
      expect(childPid(start.pid as number, "api/src/main.ts")).toBe(apiPid);
      expect(output()).toMatch(/the worker exited \(signal SIGKILL\); restarting it/);
    } finally {
      start.kill("SIGINT");
      await exit;
      // its keys gone with it
      await deletePrefix(REDIS_TARGET, prefix);
    }
  }, 90_000);

  it("a configuration that cannot work stops it with one line saying what to change, not a restart loop", async () => {
    const run = (env: Record<string, string>) =>
      npmStartToExit({
        REDIS_URL,
        FERRY_PREFIX: `${base}-config`,
        WORKER_MODELS: "digits",
        ...env,
      });
    // the API's port held by another server, one that answers /health as a stack already
    // running does: before, a stack trace and a restart every second, and an "up at" line
    // read off the other server's answer
    const taken = createServer((_req, res) => res.end("{}")).listen(0, "127.0.0.1");
    await once(taken, "listening");
    const port = (taken.address() as AddressInfo).port;
    try {
      const busy = await run({ PORT: String(port), LOG_LEVEL: "warn" });
      expect(busy.code).toBe(1);
      expect(busy.output).toContain(
        `ferry: 127.0.0.1:${port} is already in use: stop what listens there, or set PORT to a free port`,
      );
      expect(busy.output).not.toMatch(/restarting it|EADDRINUSE|at Server\.|up at/);
      // found before anything started: its worker had loaded its models and joined that
      // Redis first, for seconds
      expect(busy.output).not.toMatch(/worker/);
    } finally {
      taken.close();
    }
    const typo = await run({ PORT: String(await freePort()), WORKER_MODELS: "digitz" });
    expect(typo.code).toBe(1);
    expect(typo.output).toMatch(
      /ferry: the worker cannot serve its models .*Model 'digitz' not found/,
    );
    expect(typo.output).not.toMatch(/restarting it|\n\s+at /);
    const invalid = await run({ PORT: "eighty" });
    expect(invalid.code).toBe(1);
    expect(invalid.output).toMatch(/ferry: invalid environment: PORT: /);
    expect(invalid.output).not.toMatch(/restarting it|\n\s+at /);
    // pino's own check came as each process built its logger: a stack trace, six restarts
    const level = await run({ PORT: String(await freePort()), LOG_LEVEL: "verbose" });
    expect(level.code).toBe(1);
    expect(level.output).toMatch(/ferry: invalid environment: LOG_LEVEL: /);
    expect(level.output).not.toMatch(/restarting it|\n\s+at /);
    // its keys gone with it (what it wrote had stayed, no TTL)
    await deletePrefix(REDIS_TARGET, `${base}-config`);
  }, 90_000);

  it("npm run api or npm run worker alone never starts a private Redis (the other part would not find it): no Redis is one line, exit 1", async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    for (const part of ["api", "worker"]) {
      const alone = await npmStartToExit({ REDIS_URL: url }, 30_000, ["--only", part]);
      expect(alone.code).toBe(1);
      expect(alone.output).toContain(
        `ferry: no Redis answers at ${url}; npm run ${part} is one part of a deployment`,
      );
      expect(alone.output).not.toMatch(/private redis-server/);
    }
  }, 60_000);

  it("with the private Redis it starts when none answers, Ctrl-C (SIGINT to the whole process group) still drains: the stream ends whole, the stack exits, Redis last", async () => {
    const port = await freePort();
    const nothing = `redis://127.0.0.1:${await freePort()}`;
    const {
      child: start,
      output,
      exit,
    } = npmStart({ REDIS_URL: nothing, PORT: String(port), WORKER_MODELS: "tiny-lm" }, true);
    const url = `http://127.0.0.1:${port}`;
    let privateUrl: string | undefined;
    try {
      await waitFor(
        async () => /"worker ready"/.test(output()) && (await fetch(`${url}/v2/health/ready`)).ok,
        60_000,
      );
      privateUrl = /started a private redis-server at (redis:\/\/[\d.:]+)/.exec(output())?.[1];
      expect(privateUrl).toBeDefined();
      const res = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "tiny-lm",
          prompt: "Once upon a time",
          max_tokens: 200,
          ignore_eos: true,
          stream: true,
        }),
      });
      let signalled = false;
      const read = await readCompletion(res, () => {
        if (signalled) return;
        signalled = true;
        // one Ctrl-C as it arrives: the terminal signals the group, npm forwards it again
        process.kill(-(start.pid as number), "SIGINT");
        process.kill(start.pid as number, "SIGINT");
      });
      // before, Redis took the SIGINT too and shut down first: the stream was cut, and the
      // worker's drain waited for it forever
      expect(read.done).toBe(true);
      expect(read.error).toBeUndefined();
      expect(await Promise.race([exit, sleep(30_000).then(() => "still running")])).toBe(0);
      expect(await pingRedis(privateUrl as string, 500)).toBe(false);
    } finally {
      await killWithPrivateRedis(start, exit, privateUrl);
    }
  }, 120_000);

  it("Ctrl-C with more completions queued than the worker has seats: every one is answered (the API drains first, while the worker still serves)", async () => {
    const port = await freePort();
    const {
      child: start,
      output,
      exit,
    } = npmStart(
      { PORT: String(port), WORKER_MODELS: "tiny-lm", FERRY_PREFIX: `${base}-order` },
      true,
    );
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitFor(
        async () => /"worker ready"/.test(output()) && (await fetch(`${url}/v2/health/ready`)).ok,
        60_000,
      );
      // tiny-lm seats 16: the rest wait in the queue when the stop begins
      const answers = Array.from({ length: 40 }, (_, k) =>
        fetch(`${url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: "tiny-lm",
            prompt: `Q${k}:`,
            max_tokens: 40,
            ignore_eos: true,
          }),
        }).then(
          (res) => res.status,
          (err: unknown) => String(err),
        ),
      );
      await sleep(300);
      // one Ctrl-C as it arrives: the terminal signals the group, npm forwards it again
      process.kill(-(start.pid as number), "SIGINT");
      process.kill(start.pid as number, "SIGINT");
      expect(await Promise.all(answers)).toEqual(new Array(40).fill(200));
      expect(await Promise.race([exit, sleep(60_000).then(() => "still running")])).toBe(0);
    } finally {
      if (!exited(start)) process.kill(-(start.pid as number), "SIGKILL");
      await exit;
      // its keys gone with it (they had stayed, no TTL)
      await deletePrefix(REDIS_TARGET, `${base}-order`);
    }
  }, 120_000);

  it("the private Redis does not outlive an npm start killed with -9 (the whole group: the terminal closed, an OOM or CI timeout)", async () => {
    const {
      child: start,
      output,
      exit,
    } = npmStart(
      { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, PORT: String(await freePort()) },
      true,
    );
    let privateUrl: string | undefined;
    try {
      await waitFor(async () => {
        privateUrl = /started a private redis-server at (redis:\/\/[\d.:]+)/.exec(output())?.[1];
        return privateUrl !== undefined && (await pingRedis(privateUrl, 200));
      }, 30_000);
      process.kill(-(start.pid as number), "SIGKILL");
      await exit;
      // before, in a process group of its own so that Ctrl-C's drain could use it, it ran on
      await waitFor(async () => !(await pingRedis(privateUrl as string, 200)), 5_000);
    } finally {
      await killWithPrivateRedis(start, exit, privateUrl);
    }
  }, 60_000);

  it("a Redis that refuses it (a password it wants) is named, with the fix, not replaced by a private one", async () => {
    const port = await freePort();
    const server = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--requirepass", "s3cret"],
      { stdio: "ignore" },
    );
    try {
      const url = `redis://127.0.0.1:${port}`;
      await waitFor(async () => (await probeRedis(url, 200)).state === "refused", 10_000);
      const none = await npmStartToExit({ REDIS_URL: url });
      expect(none.code).toBe(1);
      expect(none.output).toContain(
        `ferry: the Redis at ${url} refused: NOAUTH Authentication required; put its password in REDIS_URL`,
      );
      expect(none.output).not.toMatch(/private redis-server/);
      // a wrong one, never printed
      const wrong = await npmStartToExit({ REDIS_URL: `redis://:guess@127.0.0.1:${port}` });
      expect(wrong.code).toBe(1);
      expect(wrong.output).toContain(
        `the Redis at redis://:***@127.0.0.1:${port} refused: WRONGPASS`,
      );
      expect(wrong.output).not.toContain("guess");
    } finally {
      server.kill("SIGKILL");
    }
  }, 60_000);

  it("a second Ctrl-C stops at once a drain that cannot end (a worker frozen mid-drain)", async () => {
    const port = await freePort();
    const prefix = `${base}-twice`;
    const {
      child: start,
      output,
      exit,
    } = npmStart({ REDIS_URL, FERRY_PREFIX: prefix, PORT: String(port) }, true);
    let worker = 0;
    try {
      await waitFor(async () => /"worker ready"/.test(output()), 60_000);
      worker = childPid(start.pid as number, "worker/src/main.ts");
      process.kill(worker, "SIGSTOP");
      process.kill(-(start.pid as number), "SIGINT");
      expect(await Promise.race([exit, sleep(1_500).then(() => "draining")])).toBe("draining");
      // the second press as it comes under npm: the terminal's to the group, then npm's own
      // (milliseconds apart: two at once would be one signal)
      process.kill(-(start.pid as number), "SIGINT");
      await sleep(5);
      start.kill("SIGINT");
      expect(await Promise.race([exit, sleep(15_000).then(() => "still running")])).toBe(130);
      // said once, though that Ctrl-C came twice (the terminal's and npm's)
      expect(output().split("ferry: stopping now, without waiting for the drain")).toHaveLength(2);
      expect(() => process.kill(worker, 0)).toThrow(); // the frozen worker is gone too
    } finally {
      if (!exited(start)) process.kill(-(start.pid as number), "SIGKILL");
      if (worker) {
        try {
          process.kill(worker, "SIGKILL");
        } catch {}
      }
      await exit;
      await deletePrefix(REDIS_TARGET, prefix);
    }
  }, 90_000);
});
