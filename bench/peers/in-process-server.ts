// The floor for the queue hop: a bare node:http server that runs ONNX Runtime in its own
// process, one request at a time, with no queue, batching or Redis in between.
import { createServer } from "node:http";
import { InProcessSession } from "@ferry/runtime";

const port = Number(process.argv[2] ?? 8101);
const session = await InProcessSession.load("models/mnist/1/model.onnx", {
  executionProvider: "cpu",
  intraOpThreads: 1,
});

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", async () => {
    const started = performance.now();
    const { features } = JSON.parse(Buffer.concat(chunks).toString()) as { features: number[] };
    const out = await session.run({
      input: { data: Float32Array.from(features), dims: [1, features.length] },
    });
    const logits = Array.from(out.logits?.data as Float32Array);
    const best = logits.indexOf(Math.max(...logits));
    const sum = logits.reduce((s, l) => s + Math.exp(l - (logits[best] ?? 0)), 0);
    const body = {
      prediction: best,
      confidence: 1 / sum,
      latency_ms: performance.now() - started,
      model_version: "1",
    };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
}).listen(port, "127.0.0.1", () => console.log(`in-process server on ${port}`));
