import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sweepBoardDirs } from "./queue-board.js";

describe("the board's template directories", () => {
  it("are swept at start where their process is gone, or pid-less and an hour old; no other", () => {
    const root = mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-sweep-"));
    const dir = (name: string, pid?: number) => {
      const path = join(root, name);
      mkdirSync(path);
      if (pid !== undefined) writeFileSync(join(path, "pid"), String(pid));
      return path;
    };
    // a process that has ended: its pid names no one (until reused, when the sweep keeps it)
    const gone = spawnSync(process.execPath, ["-e", "console.log(process.pid)"]);
    const deadPid = Number(gone.stdout.toString().trim());
    const live = dir("ferry-board-live", process.pid);
    const dead = dir("ferry-board-dead", deadPid);
    const young = dir("ferry-board-young");
    const old = dir("ferry-board-old");
    const hoursAgo = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(old, hoursAgo, hoursAgo);
    const other = dir("ferry-other-dead", deadPid);
    writeFileSync(join(root, "ferry-board-file"), "not a directory");

    sweepBoardDirs(root);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(young)).toBe(true);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(other)).toBe(true);
    expect(existsSync(join(root, "ferry-board-file"))).toBe(true);
  });
});
