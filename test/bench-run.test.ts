import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createRedis } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { REDIS_TARGET, waitFor } from "./helpers/stack.js";

/** This file's own prefix for the bench's stacks: other files' stacks run beside it. */
const PREFIX = `ferry-benchrun-${process.pid}`;

const bench = (...args: string[]) =>
  spawn(
    process.execPath,
    ["--conditions=ferry-source", "--import", "tsx", "bench/run.ts", ...args],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, REDIS_URL: REDIS_TARGET.url, FERRY_STACK_PREFIX: PREFIX },
    },
  );

/** The bench's stack prefixes that own keys in the test's Redis now. */
async function prefixes(): Promise<Set<string>> {
  const redis = createRedis(REDIS_TARGET, { maxRetriesPerRequest: 1 });
  try {
    const found = new Set<string>();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${PREFIX}-*`, "COUNT", 1000);
      cursor = next;
      for (const key of keys) found.add(key.split(":")[0] ?? "");
    } while (cursor !== "0");
    return found;
  } finally {
    redis.disconnect();
  }
}

/** Live processes whose environment holds `entry` (Linux' /proc). */
function processesWith(entry: string): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(entry);
      } catch {
        return false; // gone meanwhile, or not ours to read
      }
    })
    .map(Number);
}

describe("npm run bench", () => {
  it("--help prints its sections and runs nothing", async () => {
    const run = bench("--help");
    let out = "";
    run.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => run.on("exit", resolve));
    expect(code).toBe(0);
    for (const section of ["classifier", "generation", "guided", "serving", "soak"])
      expect(out).toContain(section);
    expect(out).not.toContain("wrote bench/results");
  });

  it("interrupted, it stops its stacks and deletes their keys", async () => {
    const before = await prefixes();
    const run = bench("prefix");
    const exited = new Promise<number | null>((resolve) => run.on("exit", resolve));
    // its stack has written keys under a prefix of its own
    let mine: string | undefined;
    await waitFor(async () => {
      mine = [...(await prefixes())].find((p) => !before.has(p));
      return mine !== undefined;
    }, 60_000);
    run.kill("SIGINT");
    expect(await exited).toBe(130);
    expect((await prefixes()).has(mine ?? "")).toBe(false);
    // and no API or worker of it is left running (one still starting when the signal came too)
    expect(processesWith(`FERRY_STACK_PREFIX=${PREFIX}`)).toEqual([]);
  });
});
