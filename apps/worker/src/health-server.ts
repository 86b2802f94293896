import { createServer, type Server } from "node:http";
import { exitForConfig } from "@ferry/protocol";
import type { WorkerMetrics } from "./metrics.js";

/**
 * The worker's small HTTP port: /metrics for Prometheus, /health for Kubernetes probes. Resolves
 * once it listens; a port already taken exits the process (one line, exit 78).
 */
export async function startHealthServer(
  port: number,
  metrics: WorkerMetrics,
  isReady: () => boolean,
): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === "/metrics") {
      void metrics.registry.metrics().then((text) => {
        res.writeHead(200, { "content-type": metrics.registry.contentType });
        res.end(text);
      });
      return;
    }
    if (req.url === "/health" || req.url === "/health/ready") {
      const ready = isReady();
      res.writeHead(ready ? 200 : 503, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: ready ? "ready" : "not_ready" }));
      return;
    }
    if (req.url === "/health/live") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"live"}');
      return;
    }
    res.writeHead(404).end();
  });
  // as the API's: Node's 5 s default closes an idle keep-alive connection just as a scraper
  // that waited about that long sends on it ("other side closed" in the bench's scrapes)
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.once("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EADDRINUSE")
      exitForConfig(
        `WORKER_PORT ${port} is already in use: give each worker on this machine its own`,
      );
    throw err;
  });
  await new Promise<void>((resolve) => server.listen(port, "0.0.0.0", resolve));
  return server;
}
