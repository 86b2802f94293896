import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { RedisTarget } from "@ferry/transport";

/** CPU seconds (user + system) a process has used so far; undefined off Linux. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/**
 * The redis-server addresses (redis-cli arguments) that serve a deployment: the one at `url`,
 * or a cluster's primaries, asked of its first seed node.
 */
function servers(target: RedisTarget): string[][] {
  const [seed] = target.clusterNodes ?? [];
  if (!seed) return [["-u", target.url]];
  const [host = "127.0.0.1", port = "6379"] = seed.split(":");
  try {
    const nodes = execFileSync("redis-cli", ["-h", host, "-p", port, "cluster", "nodes"], {
      encoding: "utf8",
    });
    return nodes
      .split("\n")
      .map((line) => line.split(" "))
      .filter(([, , flags = ""]) => flags.includes("master") && !flags.includes("fail"))
      .map(([, address = ""]) => {
        const [h = "", p = ""] = (address.split("@")[0] ?? "").split(":");
        return ["-h", h, "-p", p];
      });
  } catch {
    return [];
  }
}

/** The pids of the Redis servers of `target` (primaries of a cluster), from INFO (needs redis-cli). */
export function redisPid(target: RedisTarget): number[] | undefined {
  const pids: number[] = [];
  for (const args of servers(target)) {
    try {
      const info = execFileSync("redis-cli", [...args, "info", "server"], { encoding: "utf8" });
      const pid = /process_id:(\d+)/.exec(info)?.[1];
      if (pid) pids.push(Number(pid));
    } catch {
      // not reachable: left out
    }
  }
  return pids.length > 0 ? pids : undefined;
}

/**
 * CPU used by named processes between `start` and `stop`, per unit of work: where the time of
 * a CPU-bound run goes (on a small machine every process of the stack shares the same cores).
 */
export function cpuMeter(pids: Record<string, number | number[] | undefined>) {
  const used = (pid: number | number[] | undefined) => {
    const list = pid === undefined ? [] : Array.isArray(pid) ? pid : [pid];
    const each = list.map(cpuSeconds);
    return list.length === 0 || each.some((s) => s === undefined)
      ? undefined
      : each.reduce((a = 0, b = 0) => a + b, 0);
  };
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, used(pid)]));
  return {
    /** Microseconds of CPU per unit of work, per process, joined into one "a/b/c" string. */
    perUnit(units: number): string {
      return Object.entries(pids)
        .map(([name, pid]) => {
          const now = used(pid);
          const then = before[name];
          if (now === undefined || then === undefined || units === 0) return "?";
          return String(Math.round(((now - then) * 1e6) / units));
        })
        .join("/");
    },
  };
}

/** Commands Redis has run so far, by command (INFO commandstats, commands inside scripts included). */
export function redisCommandStats(target: RedisTarget | string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const args of servers(typeof target === "string" ? { url: target } : target)) {
    try {
      const info = execFileSync("redis-cli", [...args, "info", "commandstats"], {
        encoding: "utf8",
      });
      for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g))
        calls.set(m[1] ?? "", (calls.get(m[1] ?? "") ?? 0) + Number(m[2]));
    } catch {
      // no redis-cli: the bench says "?" rather than a number
    }
  }
  return calls;
}

/**
 * Commands per unit of work between two `redisCommandStats` readings: the total, and the
 * commands that made it up ("xadd 0.08 publish 0.07 ..."), most first.
 */
export function commandsPer(
  before: Map<string, number>,
  after: Map<string, number>,
  units: number,
): { total: number; by_command: string } {
  const per = [...after]
    .map(([name, n]) => [name, (n - (before.get(name) ?? 0)) / Math.max(1, units)] as const)
    .filter(([, n]) => n >= 0.005)
    .sort((a, b) => b[1] - a[1]);
  const total = per.reduce((s, [, n]) => s + n, 0);
  return {
    total: Math.round(total * 10) / 10,
    by_command: per.map(([name, n]) => `${name} ${n.toFixed(2)}`).join(", "),
  };
}
