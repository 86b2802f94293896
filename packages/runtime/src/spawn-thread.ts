import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

/**
 * Starts one of this package's thread bodies. Built output ships `<name>.js`. From source the
 * thread needs tsx, and on Node 20 a worker thread does not inherit the loader hooks of a
 * process started by tsx, so the thread registers tsx itself before importing its body.
 */
export function spawnThread(name: string, workerData: unknown): Worker {
  const js = new URL(`./${name}.js`, import.meta.url);
  if (existsSync(fileURLToPath(js))) return new Worker(js, { workerData });
  const ts = new URL(`./${name}.ts`, import.meta.url).href;
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const entry = `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(ts)}); })`;
  return new Worker(entry, { eval: true, workerData });
}
