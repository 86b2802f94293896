// `npm run bench [section...]`: runs the benchmarks side by side in one run, prints tables
// and writes bench/results/<section>-<time>.json. Never part of `npm test`.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { classifierBench } from "./classifier.js";
import { clusterBench } from "./cluster.js";
import { generationBench } from "./generation.js";
import { guidedBench } from "./guided.js";
import { hostileBench } from "./hostile.js";
import { prefixBench } from "./prefix.js";
import { servingBench } from "./serving.js";
import { soakBench } from "./soak.js";

const sections: Record<string, () => Promise<Record<string, unknown>>> = {
  classifier: classifierBench,
  cluster: clusterBench,
  generation: generationBench,
  guided: guidedBench,
  hostile: hostileBench,
  prefix: prefixBench,
  serving: servingBench,
  soak: soakBench,
};
/** Run when no section is named: all but the soak, which takes ten minutes on its own. */
const defaults = ["classifier", "generation", "guided", "prefix", "serving", "hostile"];
const wanted = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const chosen = wanted.length > 0 ? wanted : defaults;

mkdirSync("bench/results", { recursive: true });
for (const name of chosen) {
  const run = sections[name];
  if (!run) {
    console.error(`unknown bench section '${name}'; known: ${Object.keys(sections).join(", ")}`);
    process.exit(2);
  }
  const result = await run();
  const file = `bench/results/${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version };
  writeFileSync(file, `${JSON.stringify({ section: name, machine, ...result }, null, 2)}\n`);
  console.log(`\nwrote ${file}`);
}
process.exit(0);
