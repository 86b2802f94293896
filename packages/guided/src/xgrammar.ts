import { readFileSync } from "node:fs";
import { createRequire, Module } from "node:module";
import { dirname } from "node:path";

type XGrammar = typeof import("@mlc-ai/web-xgrammar");

/** CommonJS's own module record, which `node:module`'s typings leave out. */
interface CommonJsModule {
  exports: unknown;
  filename: string;
  paths: string[];
  _compile(source: string, filename: string): void;
}
type ModuleClass = new (id: string, parent?: unknown) => CommonJsModule;
type ModuleStatics = { _nodeModulePaths(from: string): string[] };

let loaded: XGrammar | undefined;

/**
 * XGrammar's WebAssembly build, loaded once per thread. Its package ships one UMD bundle
 * under `"type": "module"`, so Node's loader takes the `.js` file for ESM, where the bundle's
 * CommonJS branch (`require`, `__filename`) fails; the same file compiled as a CommonJS
 * module works, dynamic `import()` inside it included.
 */
export function xgrammar(): XGrammar {
  if (loaded) return loaded;
  const file = createRequire(import.meta.url).resolve("@mlc-ai/web-xgrammar");
  const Cjs = Module as unknown as ModuleClass & ModuleStatics;
  const mod = new Cjs(file);
  mod.filename = file;
  mod.paths = Cjs._nodeModulePaths(dirname(file));
  mod._compile(readFileSync(file, "utf8"), file);
  loaded = mod.exports as XGrammar;
  return loaded;
}
