// `npm run bench [section...]`: runs the benchmarks side by side in one run, prints tables
// and writes bench/results/<section>-<time>.json. Never part of `npm test`.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { stopAll } from "../test/helpers/stack.js";
import { batchYieldBench } from "./batch-yield.js";
import { classifierBench } from "./classifier.js";
import { clusterBench } from "./cluster.js";
import { embeddingsBench } from "./embeddings.js";
import { generationBench } from "./generation.js";
import { guidedBench } from "./guided.js";
import { hostileBench } from "./hostile.js";
import { prefixBench } from "./prefix.js";
import { servingBench } from "./serving.js";
import { soakBench } from "./soak.js";
import { tracingBench } from "./tracing.js";

const sections: Record<string, () => Promise<Record<string, unknown>>> = {
  "batch-yield": batchYieldBench,
  classifier: classifierBench,
  cluster: clusterBench,
  embeddings: embeddingsBench,
  generation: generationBench,
  guided: guidedBench,
  hostile: hostileBench,
  prefix: prefixBench,
  serving: servingBench,
  soak: soakBench,
  tracing: tracingBench,
};
/**
 * Run when no section is named: all but the soak (ten minutes on its own), the cluster (root
 * and network namespaces) and batch-yield (a 2,000-line batch's minutes).
 */
const defaults = [
  "classifier",
  "tracing",
  "generation",
  "guided",
  "prefix",
  "serving",
  "embeddings",
  "hostile",
];
/** What each section measures, for `npm run bench -- --help`. */
const about: Record<string, string> = {
  "batch-yield":
    "a 2,000-line OpenAI chat batch beside interactive streamed chats: TTFT against idle, tokens/s against continuous batching alone (--lines=N)",
  classifier:
    "classifier serving: Ferry vs in-process node:http + ONNX Runtime and FastAPI + PyTorch, batching, overload",
  cluster:
    "eight copies of digits on a local 3+3 Redis Cluster: req/s and the Redis commands a request costs",
  embeddings: "/v1/embeddings on bert-fortunes: embeddings/s vs ONNX Runtime alone at batch 32",
  generation: "continuous vs static batching, prefill strategies, TTFT and tokens/s",
  guided:
    "structured outputs on XGrammar: coverage (writes docs/guided-coverage.md), compile, masks, hostile specs",
  hostile: "hostile inputs: what each costs the API and the workers",
  prefix: "prefix caching: shared-prefix prompts with and without the cache",
  serving: "offline batches and async jobs: rows/s against ONNX Runtime alone",
  soak: "ten minutes of mixed traffic: memory and Redis growth (not run by default)",
  tracing:
    "OpenTelemetry tracing off vs on (every request traced), side by side on mnist; --baseline=<git ref> adds the code at that commit, --protocol=http/json exports OTLP as JSON (default http/protobuf), --rounds=N, --seconds=N",
};
if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log(`npm run bench [-- section...]   (default: ${defaults.join(", ")})\n`);
  for (const name of Object.keys(sections))
    console.log(`  ${name.padEnd(11)} ${about[name] ?? ""}`);
  process.exit(0);
}
// an interrupted bench stops what it started and deletes its keys, then exits as Ctrl-C does
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.once(signal, () => {
    interrupted = true;
    console.error(`\nbench interrupted (${signal}): stopping its stacks and deleting their keys`);
    void stopAll().finally(() => process.exit(130));
  });
// Stopping the stacks fails whatever the section was waiting on (a stack still starting, a
// request in flight): once interrupted, that failure is expected and must not exit first with 1.
const never = new Promise<never>(() => {});
process.on("unhandledRejection", (reason) => {
  if (interrupted) return;
  throw reason;
});
const wanted = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const chosen = wanted.length > 0 ? wanted : defaults;

mkdirSync("bench/results", { recursive: true });
for (const name of chosen) {
  const run = sections[name];
  if (!run) {
    console.error(`unknown bench section '${name}'; known: ${Object.keys(sections).join(", ")}`);
    process.exit(2);
  }
  const result = await run().catch((error: unknown) =>
    interrupted ? never : Promise.reject(error),
  );
  const file = `bench/results/${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version };
  writeFileSync(file, `${JSON.stringify({ section: name, machine, ...result }, null, 2)}\n`);
  console.log(`\nwrote ${file}`);
}
process.exit(0);
