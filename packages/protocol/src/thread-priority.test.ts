import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { spawnThread } from "./spawn-thread.js";
import { lowerThreadPriority } from "./thread-priority.js";

/** A thread's nice value, from its /proc stat line (field 19). */
function niceOf(pid: number, tid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

describe.runIf(process.platform === "linux")("lowerThreadPriority", () => {
  it("lowers the calling thread's priority and no other thread's", async () => {
    const mainBefore = niceOf(process.pid, process.pid);
    const worker = spawnThread(new URL("./fake-priority-thread.js", import.meta.url), 7);
    const { tid, applied } = await new Promise<{ tid: number; applied: boolean }>(
      (resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      },
    );
    try {
      expect(applied).toBe(true);
      expect(tid).not.toBe(process.pid);
      expect(niceOf(process.pid, tid)).toBe(Math.max(7, mainBefore));
      // the main thread, which answers requests, keeps its own
      expect(niceOf(process.pid, process.pid)).toBe(mainBefore);
    } finally {
      await worker.terminate();
    }
  });

  it("does nothing for 0, a negative or a non-number", () => {
    const before = niceOf(process.pid, process.pid);
    expect(lowerThreadPriority(0)).toBe(false);
    expect(lowerThreadPriority(-5)).toBe(false);
    expect(lowerThreadPriority(Number.NaN)).toBe(false);
    expect(niceOf(process.pid, process.pid)).toBe(before);
  });
});
