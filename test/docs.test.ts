import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { deploymentEnvSchema, modelConfigSchema } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { envSchema as apiEnvSchema } from "../apps/api/src/env.js";
import { envSchema as workerEnvSchema } from "../apps/worker/src/env.js";
import { generatorConfigSchema } from "../apps/worker/src/generation/generator-config.js";

const ROOT = resolve(import.meta.dirname, "..");
const DOCS = join(ROOT, "docs");
const README = join(ROOT, "README.md");

/** README.md and every docs/*.md. */
const pages = [
  README,
  ...readdirSync(DOCS)
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(DOCS, name)),
];

const read = (path: string) => readFileSync(path, "utf8");

/** A page's lines outside fenced code blocks (a `# comment` in a shell block is no heading). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").filter((line) => {
    if (line.trimStart().startsWith("```")) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/**
 * Variables read by the install, the model builds and the bench, never by a Ferry process's
 * schemas; and ONNX Runtime's own, which the runtime package only defaults.
 */
const OUTSIDE_THE_SERVER = new Set([
  "ONNXRUNTIME_NODE_INSTALL",
  "ORT_DISABLE_TELEMETRY",
  "GEN_ROUNDS",
  "SOAK_MINUTES",
  "TRAIN_MINUTES",
  "CHAT_MINUTES",
  "BATCH_YIELD_LINES",
  "TORCH_THREADS",
  // the worker's, read outside its env schema on purpose: a test's marker, never configuration
  "FERRY_TEST_CRASH_ON",
]);

const schemas: Record<string, z.ZodObject> = {
  deployment: deploymentEnvSchema,
  api: apiEnvSchema,
  worker: workerEnvSchema,
};

/** configuration.md's table rows, by the variable their first cell names. */
function configurationRows(): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of prose(read(join(DOCS, "configuration.md")))) {
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").slice(1, -1);
    const name = /^\s*`([A-Z][A-Z0-9_]*)`\s*$/.exec(cells[0] ?? "")?.[1];
    if (name) rows.set(name, cells);
  }
  return rows;
}

describe("docs/configuration.md", () => {
  const rows = configurationRows();
  const variables = new Set(Object.values(schemas).flatMap((s) => Object.keys(s.shape)));

  it("has a row for every variable the env schemas read", () => {
    const undocumented = [...variables].filter((name) => !rows.has(name));
    expect(undocumented).toEqual([]);
  });

  it("documents no variable the env schemas lack", () => {
    const unknown = [...rows.keys()].filter(
      (name) => !variables.has(name) && !OUTSIDE_THE_SERVER.has(name),
    );
    expect(unknown).toEqual([]);
  });

  it("states each number and word default as the schemas have it", () => {
    const wrong: string[] = [];
    for (const [owner, schema] of Object.entries(schemas)) {
      const defaults = schema.parse({}) as Record<string, unknown>;
      for (const [name, value] of Object.entries(defaults)) {
        const cell = rows.get(name)?.[1] ?? "";
        const stated =
          typeof value === "number"
            ? (cell.match(/\d[\d,_]*(?:\.\d+)?/g) ?? []).map((n) => n.replace(/[,_]/g, ""))
            : [...cell.matchAll(/`([^`]*)`/g)].map((m) => m[1]);
        const expected =
          typeof value === "number" || typeof value === "string" ? String(value) : "";
        if (expected !== "" && !stated.includes(expected))
          wrong.push(`${name} (${owner}): default ${expected}, documented "${cell.trim()}"`);
      }
    }
    expect(wrong).toEqual([]);
  });
});

/** A model.json field: whether it must be given, else its default (none when it has none). */
interface Field {
  required: boolean;
  fallback?: { value: unknown };
}

/**
 * model.json's fields, dotted (`cache.ttl_s`), as the schemas read them: the common schema's,
 * and a generator's own where the common one leaves a key open (`tokenizer`, `architecture`,
 * `scheduler`). `parents` gets the objects that hold fields (`cache`).
 */
function modelJsonFields(
  shape: Record<string, z.ZodType>,
  parents: Set<string>,
  prefix = "",
  fields = new Map<string, Field>(),
): Map<string, Field> {
  for (const [key, schema] of Object.entries(shape)) {
    const path = `${prefix}${key}`;
    let inner: z.ZodType = schema;
    const field: Field = { required: true };
    while (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault) {
      field.required = false;
      if (inner instanceof z.ZodDefault) field.fallback = { value: inner.def.defaultValue };
      inner = inner.unwrap() as z.ZodType;
    }
    if (inner instanceof z.ZodObject) {
      parents.add(path);
      modelJsonFields(inner.shape, parents, `${path}.`, fields);
    } else fields.set(path, field);
  }
  return fields;
}

/** model-repository.md's field rows, by the field their first cell names. */
function fieldRows(): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of prose(read(join(DOCS, "model-repository.md")))) {
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").slice(1, -1);
    const name = /^\s*`([a-z_][a-z0-9_.]*)`\s*$/.exec(cells[0] ?? "")?.[1];
    if (name) rows.set(name, cells);
  }
  return rows;
}

describe("docs/model-repository.md", () => {
  const rows = fieldRows();
  const parents = new Set<string>();
  const fields = modelJsonFields(
    { ...modelConfigSchema.shape, ...generatorConfigSchema.shape },
    parents,
  );

  it("has a row for every model.json field the schemas read", () => {
    expect(fields.has("name")).toBe(true);
    const undocumented = [...fields.keys()].filter((name) => !rows.has(name));
    expect(undocumented).toEqual([]);
  });

  it("documents no field the schemas lack", () => {
    const unknown = [...rows.keys()].filter((name) => !fields.has(name) && !parents.has(name));
    expect(unknown).toEqual([]);
  });

  it("says which fields are required, and states each default as the schemas have it", () => {
    const wrong: string[] = [];
    for (const [name, field] of fields) {
      const cell = rows.get(name)?.[1] ?? "";
      if (field.required) {
        if (!cell.includes("required"))
          wrong.push(`${name}: required, documented "${cell.trim()}"`);
        continue;
      }
      if (!field.fallback) continue;
      const value = field.fallback.value;
      const expected =
        typeof value === "string" ? (value === "" ? '""' : value) : JSON.stringify(value);
      const stated = [
        ...[...cell.matchAll(/`([^`]*)`/g)].map((m) => m[1]),
        ...(cell.match(/\d[\d,_]*/g) ?? []).map((n) => n.replace(/[,_]/g, "")),
      ];
      if (!stated.includes(expected))
        wrong.push(`${name}: default ${expected}, documented "${cell.trim()}"`);
    }
    expect(wrong).toEqual([]);
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchors(path: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const line of prose(read(path))) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1"));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

/** Every link target of a page's prose: inline `[text](target)`, `<url>` and `[ref]: target`. */
function links(path: string): string[] {
  const targets: string[] = [];
  for (const line of prose(read(path))) {
    const text = line.replace(/`[^`]*`/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) targets.push(m[1] ?? "");
    for (const m of text.matchAll(/<(https?:\/\/[^>]+)>/g)) targets.push(m[1] ?? "");
    const ref = /^\s*\[[^\]]+\]:\s+(\S+)/.exec(text)?.[1];
    if (ref) targets.push(ref);
  }
  return targets;
}

const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "0.0.0.0"]);

describe("README.md and docs/", () => {
  it("link only within the repository, to files and headings that exist", () => {
    const broken: string[] = [];
    for (const page of pages) {
      const from = relative(ROOT, page);
      for (const target of links(page)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
          const host = /^https?:\/\/([^/:]+)/i.exec(target)?.[1];
          if (!host || !LOCAL_HOSTS.has(host))
            broken.push(`${from}: ${target} leaves the repository`);
          continue;
        }
        const [file = "", anchor] = target.split("#");
        const path = file === "" ? page : resolve(dirname(page), decodeURIComponent(file));
        if (relative(ROOT, path).startsWith("..")) {
          broken.push(`${from}: ${target} is outside the repository`);
        } else if (!existsSync(path)) {
          broken.push(`${from}: ${target} does not exist`);
        } else if (anchor && (statSync(path).isDirectory() || !anchors(path).has(anchor))) {
          broken.push(`${from}: ${target} has no heading #${anchor}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("name no web address other than a local one, even in code", () => {
    const remote: string[] = [];
    for (const page of pages)
      for (const m of read(page).matchAll(/https?:\/\/([^/:\s)>`'"]+)/g))
        if (!LOCAL_HOSTS.has(m[1] ?? "")) remote.push(`${relative(ROOT, page)}: ${m[0]}`);
    expect(remote).toEqual([]);
  });

  it("point nowhere outside the repository, as a clone has it", () => {
    const outside = pages.filter((page) => read(page).includes("../shared/"));
    expect(outside.map((page) => relative(ROOT, page))).toEqual([]);
  });

  it("keep the README short, with the two commands", () => {
    const readme = read(README);
    expect(readme.trimEnd().split("\n").length).toBeLessThanOrEqual(200);
    expect(readme).toContain("npm ci && npm start");
    expect(readme).toContain("npm ci && npm test");
  });
});
