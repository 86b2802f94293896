// The floor for an overload refusal: a bare node:http server that answers every request with
// 429 (Retry-After: 1) the moment its body has arrived, and does nothing else. What its
// refusals take to arrive under a flood is what this machine's event loop and loopback allow
// any Node server, whatever its admission policy.
import { createServer } from "node:http";

const port = Number(process.argv[2] ?? 8102);
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res
      .writeHead(429, { "content-type": "application/json", "retry-after": "1" })
      .end('{"error":{"code":"QUEUE_FULL"}}');
  });
});
server.keepAliveTimeout = 65_000;
server.listen({ port, host: "127.0.0.1", backlog: 8_192 }, () =>
  console.log(`refuse-all server on ${port}`),
);
