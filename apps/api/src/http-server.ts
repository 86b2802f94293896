import { createServer, type Server } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { createApp } from "./app.js";
import { apiKeyAuthenticator } from "./middleware/auth.js";
import type { InFlight } from "./middleware/in-flight.js";
import { tenantLimiter } from "./middleware/tenant-limits.js";
import { type Guards, predictFastPath } from "./predict-fast-path.js";
import type { Services } from "./services.js";

/**
 * The API's HTTP server: the predict fast path for the hot route's common form, Hono for
 * everything else, both behind one set of guards (a tenant's limits count both paths).
 */
export function createHttpServer(services: Services, inFlight: InFlight): Server {
  const { env } = services;
  const keys = (env.API_KEYS ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
  const guards: Guards = {
    authenticate: apiKeyAuthenticator(keys, env.ADMIN_TOKEN),
    limit: tenantLimiter({
      ratePerS: env.KEY_RATE_LIMIT_RPS,
      burst: env.KEY_RATE_BURST,
      maxConcurrent: env.KEY_MAX_CONCURRENT,
    }),
  };
  const hono = getRequestListener(createApp(services, inFlight, guards).fetch);
  const fast = env.PREDICT_FAST_PATH ? predictFastPath(services, inFlight, guards) : undefined;
  return createServer((req, res) => {
    if (fast?.(req, res)) return;
    void hono(req, res);
  });
}
