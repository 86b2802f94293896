import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** CPU seconds (user + system) a process has used so far; undefined off Linux. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** The pid of the Redis server at `url`, from its INFO (needs redis-cli). */
export function redisPid(url: string): number | undefined {
  try {
    const info = execFileSync("redis-cli", ["-u", url, "info", "server"], { encoding: "utf8" });
    const pid = /process_id:(\d+)/.exec(info)?.[1];
    return pid ? Number(pid) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU used by named processes between `start` and `stop`, per unit of work: where the time of
 * a CPU-bound run goes (on a small machine every process of the stack shares the same cores).
 */
export function cpuMeter(pids: Record<string, number | undefined>) {
  const before = Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => [name, pid ? cpuSeconds(pid) : undefined]),
  );
  return {
    /** Microseconds of CPU per unit of work, per process, joined into one "a/b/c" string. */
    perUnit(units: number): string {
      return Object.entries(pids)
        .map(([name, pid]) => {
          const now = pid ? cpuSeconds(pid) : undefined;
          const then = before[name];
          if (now === undefined || then === undefined || units === 0) return "?";
          return String(Math.round(((now - then) * 1e6) / units));
        })
        .join("/");
    },
  };
}

/** Commands Redis has run so far, by command (INFO commandstats, commands inside scripts included). */
export function redisCommandStats(url: string): Map<string, number> {
  const calls = new Map<string, number>();
  try {
    const info = execFileSync("redis-cli", ["-u", url, "info", "commandstats"], {
      encoding: "utf8",
    });
    for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g))
      calls.set(m[1] ?? "", Number(m[2]));
  } catch {
    // no redis-cli: the bench says "?" rather than a number
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
