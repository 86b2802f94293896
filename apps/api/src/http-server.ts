import { createServer, type Server } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { createApp } from "./app.js";
import { guardsFrom } from "./guards.js";
import type { InFlight } from "./middleware/in-flight.js";
import { predictFastPath } from "./predict-fast-path.js";
import type { Services } from "./services.js";

/** The API's HTTP server: the predict fast path for the hot route's common form, Hono for the rest. */
export function createHttpServer(services: Services, inFlight: InFlight): Server {
  const guards = guardsFrom(services.env);
  services.metrics.watchTurns(() => guards.turns.queued);
  const hono = getRequestListener(createApp(services, inFlight, guards).fetch);
  const fast = services.env.PREDICT_FAST_PATH
    ? predictFastPath(services, inFlight, guards)
    : undefined;
  return createServer((req, res) => {
    if (fast?.(req, res)) return;
    void hono(req, res);
  });
}
