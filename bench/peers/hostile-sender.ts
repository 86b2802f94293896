import { samples } from "../../test/helpers/samples.js";
import { endlessLine } from "../../test/helpers/uploads.js";

/**
 * The hostile bench's attacker, a process of its own so that building and sending its bodies
 * (tens of MB a second) costs the measured clients' process nothing: rounds of the worst
 * inputs against the stack at argv[2], five a second at most, while the parent says "on"
 * (IPC), the rounds done sent back on "stop".
 */
const base = process.argv[2] ?? "";
const prompt = Buffer.from(JSON.stringify({ model: "tiny-lm", prompt: "p".repeat(7_000_000) }));
// a 7 MB JSON batch whose last item is bad: read whole, refused, nothing queued
const items = Array.from({ length: 40_000 }, (_, k) => ({
  key: `h${k}`,
  features: k === 39_999 ? [1] : samples.digits.inputs[k % 64],
}));
const jsonBatch = Buffer.from(JSON.stringify({ model: "digits", items }));
// 12,000 token ids (75 KB, under the byte rate's floor): past the context, a 400
const ids = Buffer.from(
  JSON.stringify({
    model: "tiny-lm",
    prompt: Array.from({ length: 12_000 }, (_, k) => (k * 31) % 250),
  }),
);
const deep = Buffer.from(
  `{"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","data":${"[".repeat(100_000)}1${"]".repeat(100_000)}}]}`,
);
// 8 MB of `{}` in a field no schema reads: what JSON.parse makes of it, not its bytes
const objects = Buffer.from(
  `{"model":"no-such-model","input":{"features":[1]},"junk":[${"{},".repeat(2_700_000)}{}]}`,
);
const post = (path: string, body: Buffer | ReadableStream<Uint8Array>, type: string) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": type },
    body,
    duplex: "half",
  } as RequestInit)
    .then((r) => r.arrayBuffer())
    .catch(() => undefined);

let on = false;
let stop = false;
let rounds = 0;
process.on("message", (message) => {
  if (message === "on") on = true;
  else if (message === "off") on = false;
  else if (message === "stop") stop = true;
});
process.send?.("ready");
while (!stop) {
  if (!on) {
    await new Promise((r) => setTimeout(r, 20));
    continue;
  }
  await Promise.all([
    post("/v1/batches?model=digits", endlessLine(30 * 1024 * 1024), "application/x-ndjson"),
    post("/v1/completions", prompt, "application/json"),
    post("/v2/models/digits/infer", deep, "application/json"),
    post("/v1/batches", jsonBatch, "application/json"),
    post("/v1/completions", ids, "application/json"),
    post("/v1/jobs", objects, "application/json"),
    new Promise((r) => setTimeout(r, 200)),
  ]);
  rounds++;
}
process.send?.({ rounds }, () => process.exit(0));
