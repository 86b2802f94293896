import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { createApp } from "./app.js";
import { guardsFrom } from "./guards.js";
import { predictFastPath } from "./inference/predict-fast-path.js";
import type { InFlight } from "./middleware/in-flight.js";
import type { InteractiveLoad } from "./parsing/interactive-load.js";
import type { Services } from "./services.js";

/**
 * The API's HTTP server: the predict fast path for the hot route's common form, Hono for the
 * rest; and its request handler, which the probe port (`probe-server.ts`) shares.
 */
export function createHttpServer(
  services: Services,
  inFlight: InFlight,
  /** Counts the interactive requests, which offline parsing waits for. */
  interactive?: InteractiveLoad,
): { server: Server; handle: (req: IncomingMessage, res: ServerResponse) => void } {
  const guards = guardsFrom(services.env);
  services.metrics.watchTurns(() => guards.turns.queued);
  const hono = getRequestListener(createApp(services, inFlight, guards).fetch);
  const fast = services.env.PREDICT_FAST_PATH
    ? predictFastPath(services, inFlight, guards)
    : undefined;
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    interactive?.watch(req, res);
    if (fast?.(req, res)) return;
    void hono(req, res);
  };
  return { server: createServer(handle), handle };
}
