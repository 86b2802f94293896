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

/** Commands Redis has run so far (INFO commandstats, commands inside scripts included). */
export function redisCommands(url: string): number {
  try {
    const info = execFileSync("redis-cli", ["-u", url, "info", "commandstats"], {
      encoding: "utf8",
    });
    let calls = 0;
    for (const m of info.matchAll(/calls=(\d+)/g)) calls += Number(m[1]);
    return calls;
  } catch {
    return Number.NaN;
  }
}
