import { readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { FerryError, MODEL_NAME, type ModelConfig, modelConfigSchema } from "@ferry/protocol";

/** One model of the repository: its config and the versions that have a model.onnx. */
export interface ModelEntry {
  config: ModelConfig;
  /** Version directories holding a model.onnx, in ascending numeric order. */
  versions: string[];
  /** Served when a request names no version: `stable_version`, else the highest version. */
  defaultVersion: string;
  dir: string;
  /** Unix seconds: when its default version's model.onnx was written (OpenAI's `created`). */
  created: number;
}

/**
 * Reads a Triton-style model repository: `<root>/<name>/model.json` and
 * `<root>/<name>/<version>/model.onnx`. Directories without a model.json are skipped.
 *
 * @example
 * const repo = await ModelRepository.open("./models");
 * repo.resolve("digits").version; // "2"
 */
export class ModelRepository {
  private constructor(
    readonly root: string,
    private models: Map<string, ModelEntry>,
  ) {}

  /**
   * One model as the disk has it now (its directory, or `<root>/<name>` for one not seen
   * before), without changing this view. A reload is of one model, as the workers reload it:
   * another model's files, changed or half-edited on disk, are neither taken nor an error.
   */
  async rereadModel(name: string): Promise<ModelEntry> {
    // a name from a request: never a path out of the repository
    if (!MODEL_NAME.test(name))
      throw new FerryError("MODEL_NOT_FOUND", `Model '${name}' not found in the repository`);
    const dir = this.models.get(name)?.dir ?? join(this.root, name);
    const configPath = join(dir, "model.json");
    if (!(await isFile(configPath)))
      throw new FerryError("MODEL_NOT_FOUND", `Model '${name}' not found in the repository`);
    const entry = await readEntry(dir, configPath);
    if (entry.config.name !== name)
      throw new Error(`${configPath}: names the model '${entry.config.name}', not '${name}'`);
    return entry;
  }

  /** Takes `entry` (from `rereadModel`) as its model's, leaving every other model as it is. */
  adoptModel(entry: ModelEntry): void {
    // in the order `open` lists them, a model new to this view included
    const models = [...this.models.values()].filter((m) => m.config.name !== entry.config.name);
    models.push(entry);
    models.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0));
    this.models = new Map(models.map((m) => [m.config.name, m]));
  }

  static async open(root: string): Promise<ModelRepository> {
    const abs = resolve(root);
    const models = new Map<string, ModelEntry>();
    for (const name of (await readdir(abs)).sort()) {
      const dir = join(abs, name);
      const configPath = join(dir, "model.json");
      if (!(await isFile(configPath))) continue;
      const entry = await readEntry(dir, configPath);
      models.set(entry.config.name, entry);
    }
    return new ModelRepository(abs, models);
  }

  list(): ModelEntry[] {
    return [...this.models.values()];
  }

  get(name: string): ModelEntry {
    const entry = this.models.get(name);
    if (!entry) throw new FerryError("MODEL_NOT_FOUND", `Model '${name}' not found`);
    return entry;
  }

  has(name: string): boolean {
    return this.models.has(name);
  }

  /** The entry and the version a request for `version` (or none) is served by. */
  resolve(name: string, version?: string): { entry: ModelEntry; version: string } {
    const entry = this.get(name);
    const chosen = version ?? entry.defaultVersion;
    if (!entry.versions.includes(chosen)) {
      throw new FerryError("VERSION_NOT_FOUND", `Model '${name}' has no version '${chosen}'`);
    }
    return { entry, version: chosen };
  }
}

async function readEntry(dir: string, configPath: string): Promise<ModelEntry> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(configPath, "utf8"));
  } catch (cause) {
    throw new Error(`${configPath}: not valid JSON`, { cause });
  }
  const parsed = modelConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`${configPath}: ${parsed.error.issues.map(formatIssue).join("; ")}`);
  }
  const config = parsed.data;
  const versions: string[] = [];
  for (const child of await readdir(dir)) {
    if (/^\d+$/.test(child) && (await isFile(join(dir, child, "model.onnx")))) versions.push(child);
  }
  versions.sort((a, b) => Number(a) - Number(b));
  const last = versions.at(-1);
  if (last === undefined) throw new Error(`${dir}: no <version>/model.onnx`);
  const stable = config.stable_version;
  if (stable !== undefined && !versions.includes(stable)) {
    throw new Error(`${configPath}: stable_version '${stable}' has no model.onnx`);
  }
  const defaultVersion = stable ?? last;
  const written = await stat(join(dir, defaultVersion, "model.onnx"));
  return { config, versions, defaultVersion, dir, created: Math.floor(written.mtimeMs / 1000) };
}

function formatIssue(issue: { path: PropertyKey[]; message: string }): string {
  return `${issue.path.map(String).join(".") || "(root)"}: ${issue.message}`;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
