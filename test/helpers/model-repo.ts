import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A copy of some shipped models in a temp dir, with model.json fields overridden, for tests
 * that need a small queue or a slow delay without touching models/.
 */
export function tempRepository(overrides: Record<string, Record<string, unknown>>): string {
  const root = mkdtempSync(join(tmpdir(), "ferry-models-"));
  for (const [name, patch] of Object.entries(overrides)) {
    cpSync(join("models", name), join(root, name), { recursive: true });
    const path = join(root, name, "model.json");
    const config = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    writeFileSync(path, JSON.stringify({ ...config, ...patch }, null, 2));
  }
  return root;
}

/**
 * A copy of `repo` in which every version of `model` runs another model's graph (one with a
 * different input width), so that each run fails on the worker with MODEL_ERROR while the
 * config, versions and the serving generation stay the same: a model that fails, not one
 * that is missing.
 */
export function brokenRepository(repo: string, model: string, graphOf: string): string {
  const root = mkdtempSync(join(tmpdir(), "ferry-broken-"));
  cpSync(repo, root, { recursive: true });
  const config = JSON.parse(readFileSync(join(root, model, "model.json"), "utf8")) as {
    versions: Record<string, unknown>;
  };
  for (const version of Object.keys(config.versions))
    cpSync(join("models", graphOf, "1", "model.onnx"), join(root, model, version, "model.onnx"));
  return root;
}
