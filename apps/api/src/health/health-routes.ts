import { queueName } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { healthSchema } from "./schemas.js";

const probeSchema = z.object({ live: z.boolean().optional(), ready: z.boolean().optional() });

const healthRoute = createRoute({
  method: "get",
  path: "/health",
  summary: "Redis and per-model worker status",
  responses: { 200: json(healthSchema, "Healthy or degraded; the body says which") },
});

const liveRoute = createRoute({
  method: "get",
  path: "/v2/health/live",
  summary: "Liveness: the process answers",
  responses: { 200: json(probeSchema, "Live") },
});

const readyRoute = createRoute({
  method: "get",
  path: "/v2/health/ready",
  summary: "Readiness: Redis reachable and not draining",
  responses: { 200: json(probeSchema, "Ready"), 503: json(probeSchema, "Not ready") },
});

export function registerHealth(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(healthRoute, async (c) => {
    const services = c.get("services");
    const redisUp = await services.health.redisUp();
    const counts = redisUp
      ? await services.health.workersPerQueue().catch(() => new Map<string, number>())
      : new Map();
    const models: Record<string, { ready: boolean; workers: number }> = {};
    for (const entry of services.repository.list()) {
      const workers = counts.get(queueName(entry.config.name, entry.defaultVersion)) ?? 0;
      models[entry.config.name] = { ready: workers > 0, workers };
    }
    const healthy = redisUp && Object.values(models).every((m) => m.ready);
    return c.json(
      { status: healthy ? "healthy" : "degraded", redis: redisUp ? "up" : "down", models },
      200,
    );
  });
  app.openapi(liveRoute, (c) => c.json({ live: true }, 200));
  app.openapi(readyRoute, async (c) => {
    // An API replica can take requests when it can queue them; workers may scale to zero.
    const ready = await c.get("services").health.ready();
    return c.json({ ready }, ready ? 200 : 503);
  });
}
