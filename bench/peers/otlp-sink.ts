// An OTLP/HTTP trace receiver for benches, in a process of its own as a collector would be:
// it takes every export (POST /v1/traces, http/protobuf or http/json), counts the requests and
// their bytes without decoding them, and answers as a collector does. GET /stats reports the
// counts. Run in the bench's own process it would share the load generator's event loop, and
// its work would be billed to the stack that exports.
import { createServer } from "node:http";

const port = Number(process.argv[2] ?? 4318);
let exports = 0;
let bytes = 0;
const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/stats") {
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ exports, bytes }));
    return;
  }
  req.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on("end", () => {
    exports++;
    const json = (req.headers["content-type"] ?? "").includes("json");
    res
      .writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" })
      .end(json ? "{}" : undefined);
  });
});
server.listen({ port, host: "127.0.0.1" }, () => console.log(`otlp sink on ${port}`));
