import { existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Proc, Stack } from "./helpers/stack.js";

// A replica with nothing to do should sleep: a fleet scaled out for a peak idles most of the
// day. Each wake of a process' main thread is a voluntary context switch, counted by Linux.
const stack = new Stack({ env: { WORKER_MODELS: "digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** Times the main thread of `proc` went to sleep, as /proc counts them. */
function sleeps(proc: Proc): number {
  const pid = proc.child.pid;
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8");
  return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1]);
}

describe.runIf(existsSync("/proc/self/task"))("an idle deployment", () => {
  it("wakes its API and worker a few times a second, not a hundred", async () => {
    const procs = { api: stack.api, worker: stack.workers[0] as Proc };
    const before = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, sleeps(p)]));
    const seconds = 3;
    await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
    const rates = Object.fromEntries(
      Object.entries(procs).map(([k, p]) => [k, (sleeps(p) - (before[k] ?? 0)) / seconds]),
    );
    // measured: ~20 a second each (sweeps, blocking reads' timeouts); prom-client's default
    // event-loop lag sampling alone added 100
    expect(rates.api).toBeLessThan(50);
    expect(rates.worker).toBeLessThan(50);
  });
});
