import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { failingClassifierGraph } from "./failing-onnx.js";

/** The temp repositories this process made outside a test run (a bench's): removed at exit. */
const made: string[] = [];
process.once("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A new temp directory, in the test run's own (global-setup.ts), else removed at exit. */
export function tempDir(prefix: string): string {
  const runDir = process.env.FERRY_TEST_TMP;
  if (runDir) return mkdtempSync(join(runDir, prefix));
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/**
 * A copy of some shipped models in a temp dir, with model.json fields overridden, for tests
 * that need a small queue or a slow delay without touching models/.
 */
export function tempRepository(overrides: Record<string, Record<string, unknown>>): string {
  const root = tempDir("ferry-models-");
  for (const [name, patch] of Object.entries(overrides)) {
    cpSync(join("models", name), join(root, name), { recursive: true });
    const path = join(root, name, "model.json");
    const config = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    writeFileSync(path, JSON.stringify({ ...config, ...patch }, null, 2));
  }
  return root;
}

/**
 * A copy of `repo` in which every version of `model` is a graph that fails every run
 * (`failingClassifierGraph`), so that each run fails on the worker with MODEL_ERROR while the
 * config, versions and the serving generation stay the same: a model that fails, not one
 * that is missing, nor one refused at load (another model's graph would be: its model.json
 * no longer describes it).
 */
export function brokenRepository(repo: string, model: string): string {
  const root = tempDir("ferry-broken-");
  cpSync(repo, root, { recursive: true });
  const config = JSON.parse(readFileSync(join(root, model, "model.json"), "utf8")) as {
    versions: Record<string, unknown>;
    inputs: Array<{ dims: number[] }>;
    outputs: Array<{ dims: number[] }>;
  };
  const graph = failingClassifierGraph(
    config.inputs[0]?.dims[0] ?? 1,
    config.outputs[0]?.dims[0] ?? 1,
  );
  for (const version of Object.keys(config.versions))
    writeFileSync(join(root, model, version, "model.onnx"), graph);
  return root;
}
