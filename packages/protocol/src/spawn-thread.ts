import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type ResourceLimits, Worker } from "node:worker_threads";

/**
 * Starts a thread whose body is the module `body` names (its built `.js`). Built output ships
 * that file. From source the body is the `.ts` beside it and needs tsx, and on Node 20 a worker
 * thread does not inherit the loader hooks of a process started by tsx, so the thread
 * registers tsx itself before importing its body.
 *
 * @example
 * const thread = spawnThread(new URL("./grammar-thread.js", import.meta.url));
 */
export function spawnThread(
  body: URL,
  workerData?: unknown,
  resourceLimits?: ResourceLimits,
): Worker {
  const options = { workerData, ...(resourceLimits ? { resourceLimits } : {}) };
  if (existsSync(fileURLToPath(body))) return new Worker(body, options);
  const ts = new URL(body.href.replace(/\.js$/, ".ts")).href;
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const entry = `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(ts)}); })`;
  return new Worker(entry, { eval: true, ...options });
}
