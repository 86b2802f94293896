// Runs one hostile spec on the hand-written engine in a process of its own (it may spend
// minutes and gigabytes): prints {"compileMs", "maskMs"} or dies.
import { ByteTokenizer } from "@ferry/model-repository";
import { oldGuide } from "./old-engine.js";

const spec = JSON.parse(process.argv[2] ?? "{}");
const started = performance.now();
const guide = oldGuide(spec, new ByteTokenizer(256), 257);
const compiled = performance.now();
const logits = new Float32Array(257);
guide.mask(logits);
console.log(
  JSON.stringify({ compileMs: compiled - started, maskMs: performance.now() - compiled }),
);
