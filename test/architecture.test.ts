import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/** Every import specifier of every .ts file under `dir`. */
function importsUnder(dir: string): Array<{ file: string; spec: string }> {
  const found: Array<{ file: string; spec: string }> = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts")) {
        const text = readFileSync(path, "utf8");
        for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)["']([^"']+)["']/g)) {
          if (m[1]) found.push({ file: path, spec: m[1] });
        }
      }
    }
  };
  walk(dir);
  return found;
}

const offenders = (dir: string, banned: (spec: string) => boolean) =>
  importsUnder(dir)
    .filter((i) => banned(i.spec))
    .map((i) => `${i.file} imports ${i.spec}`);

const packages = ["protocol", "transport", "runtime", "model-repository", "guided", "telemetry"];

describe("dependency direction", () => {
  it("only the transport package imports bullmq or ioredis", () => {
    const redisy = (s: string) => s === "bullmq" || s === "ioredis";
    for (const dir of [
      "apps/api/src",
      "apps/worker/src",
      ...packages.filter((p) => p !== "transport").map((p) => `packages/${p}/src`),
    ]) {
      expect(offenders(dir, redisy)).toEqual([]);
    }
  });

  it("only the runtime package imports onnxruntime-node, and the API never imports the runtime", () => {
    const onnx = (s: string) => s.startsWith("onnxruntime");
    for (const dir of [
      "apps/api/src",
      "apps/worker/src",
      ...packages.filter((p) => p !== "runtime").map((p) => `packages/${p}/src`),
    ]) {
      expect(offenders(dir, onnx)).toEqual([]);
    }
    expect(offenders("apps/api/src", (s) => s === "@ferry/runtime")).toEqual([]);
  });

  it("the protocol package imports nothing of ours", () => {
    expect(offenders("packages/protocol/src", (s) => s.startsWith("@ferry/"))).toEqual([]);
  });

  it("no package imports an app, and no app imports another", () => {
    const appImport = (s: string) =>
      s.startsWith("@ferry/api") || s.startsWith("@ferry/worker") || s.includes("apps/");
    for (const p of packages) expect(offenders(`packages/${p}/src`, appImport)).toEqual([]);
    expect(
      offenders("apps/api/src", (s) => s.startsWith("@ferry/worker") || s.includes("worker/src")),
    ).toEqual([]);
    expect(
      offenders("apps/worker/src", (s) => s.startsWith("@ferry/api") || s.includes("api/src")),
    ).toEqual([]);
  });
});

/** Which of our packages each may import: protocol < model-repository, runtime, transport, guided, telemetry < apps. */
const allowed: Record<string, string[]> = {
  protocol: [],
  "model-repository": ["protocol"],
  runtime: ["protocol"],
  transport: ["protocol"],
  guided: ["protocol"],
  telemetry: ["protocol"],
};

describe("package order and cycles", () => {
  it("each package imports only the packages below it", () => {
    for (const [pkg, below] of Object.entries(allowed)) {
      const ours = (s: string) => s.startsWith("@ferry/");
      const wrong = importsUnder(`packages/${pkg}/src`)
        .filter((i) => ours(i.spec) && !below.includes(i.spec.slice("@ferry/".length)))
        .map((i) => `${i.file} imports ${i.spec}`);
      expect(wrong).toEqual([]);
    }
  });

  it("routes parse and render only: they never import the transport", () => {
    const routes = importsUnder("apps/api/src").filter((i) => i.file.endsWith("-routes.ts"));
    expect(routes.length).toBeGreaterThan(50);
    expect(
      routes.filter((i) => i.spec === "@ferry/transport").map((i) => `${i.file} imports ${i.spec}`),
    ).toEqual([]);
  });

  it("the transport's client side and worker side never import each other", () => {
    expect(offenders("packages/transport/src/client", (s) => s.includes("/worker/"))).toEqual([]);
    expect(offenders("packages/transport/src/worker", (s) => s.includes("/client/"))).toEqual([]);
    expect(
      offenders("packages/transport/src/shared", (s) => /\/(client|worker)\//.test(s)),
    ).toEqual([]);
  });

  it("no import cycle in any package or app", () => {
    for (const dir of [
      ...packages.map((p) => `packages/${p}/src`),
      "apps/api/src",
      "apps/worker/src",
    ]) {
      expect(cycles(dir), dir).toEqual([]);
    }
  });
});

/** The API's folders by protocol, and the shared ones any of them may use. */
const PROTOCOLS = [
  "openai",
  "kserve-v2",
  "inference",
  "jobs",
  "batches",
  "files",
  "admin",
  "health",
  "web",
];
const SHARED = ["http", "middleware"];
describe("the API's folders", () => {
  it("are by protocol, with at most ~10 files directly in src/", () => {
    const top = readdirSync("apps/api/src").filter(
      (n) => n.endsWith(".ts") && !n.endsWith(".test.ts"),
    );
    expect(top.length).toBeLessThanOrEqual(10);
    for (const dir of [...PROTOCOLS, ...SHARED])
      expect(statSync(`apps/api/src/${dir}`).isDirectory()).toBe(true);
  });

  it("protocol folders import each other only through shared http/ (types aside: a service handed over at boot, by its type), shared folders none of them", () => {
    const wrong: string[] = [];
    for (const dir of [...PROTOCOLS, ...SHARED]) {
      for (const { file, spec } of importsUnder(`apps/api/src/${dir}`)) {
        const target = /^\.\.\/([a-z0-9-]+)\//.exec(spec)?.[1];
        if (!target || target === dir || !PROTOCOLS.includes(target)) continue;
        if (file.endsWith(".test.ts")) continue;
        const typeOnly = new RegExp(
          `import type [^;]*from ["']${spec.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}["']`,
        ).test(readFileSync(file, "utf8"));
        if (typeOnly) continue;
        wrong.push(`${file} imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});

/** Import cycles among the files under `dir` (relative imports), each as a path of files. */
function cycles(dir: string): string[] {
  const graph = new Map<string, string[]>();
  for (const { file, spec } of importsUnder(dir)) {
    if (!spec.startsWith(".")) continue;
    const target = join(file, "..", spec).replace(/\.js$/, ".ts");
    graph.set(file, [...(graph.get(file) ?? []), target]);
  }
  const found: string[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "open") {
      found.push([...path.slice(path.indexOf(file)), file].join(" -> "));
      return;
    }
    state.set(file, "open");
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, "done");
  };
  for (const file of graph.keys()) visit(file, []);
  return found;
}
