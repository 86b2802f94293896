import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * One temp directory for the whole test run, where tests and helpers make theirs (model
 * repositories, say), removed when the run ends: a worker process that vitest ends does not
 * run its own exit handlers, and every run had left its repositories in /tmp.
 */
export default function setup(): () => void {
  // vitest calls it for the root and for each project: the first one's directory serves all
  if (process.env.FERRY_TEST_TMP) return () => {};
  const dir = mkdtempSync(join(tmpdir(), "ferry-test-run-"));
  process.env.FERRY_TEST_TMP = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
