import { queueName } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { healthSchema } from "../schemas.js";
import type { AppEnv } from "../services.js";
import { json } from "./responses.js";
import { workersPerQueue } from "./v2-models.js";

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

export function registerHealth(app: OpenAPIHono<AppEnv>): void {
  app.openapi(healthRoute, async (c) => {
    const services = c.get("services");
    const redisUp = await services.client.ping();
    const counts = redisUp
      ? await workersPerQueue(services).catch(() => new Map<string, number>())
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
    const services = c.get("services");
    // An API replica can take requests when it can queue them; workers may scale to zero.
    const ready = !services.draining() && (await services.client.ping());
    return c.json({ ready }, ready ? 200 : 503);
  });
}
