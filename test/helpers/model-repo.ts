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
