import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";

const versionStats = z.object({
  requests: z.number(),
  errors: z.number(),
  error_rate: z.number().nullable(),
  p50_ms: z.number().nullable(),
  p95_ms: z.number().nullable(),
  p99_ms: z.number().nullable(),
});
const modelAdminSchema = z
  .object({
    name: z.string(),
    kind: z.string(),
    versions: z.array(z.string()),
    stable_version: z.string(),
    traffic: z.record(z.string(), z.number()),
    stats: z.record(z.string(), versionStats),
    cache: z.object({ hits: z.number(), misses: z.number(), hit_rate: z.number().nullable() }),
    fallbacks: z.record(z.string(), z.number()),
  })
  .openapi("AdminModel");
const nameParam = z.object({ name: z.string() });

const listRoute = createRoute({
  method: "get",
  path: "/admin/models",
  summary: "Versions, traffic split and per-version requests, errors and latency of every model",
  responses: { 200: json(z.object({ models: z.array(modelAdminSchema) }), "Models") },
});

const trafficRoute = createRoute({
  method: "put",
  path: "/admin/models/{name}/traffic",
  summary:
    'Canary split, e.g. {"1":90,"2":10}: existing versions, whole percentages adding up to 100',
  request: {
    params: nameParam,
    body: {
      content: { "application/json": { schema: z.record(z.string(), z.number()) } },
      required: true,
    },
  },
  responses: { 200: json(modelAdminSchema, "The model after the change"), ...openAiErrors },
});

const rollbackRoute = createRoute({
  method: "post",
  path: "/admin/models/{name}/rollback",
  summary: "All traffic back to the stable version, in one move",
  request: { params: nameParam },
  responses: {
    200: json(modelAdminSchema, "The model after the rollback"),
    404: openAiErrors[404],
  },
});

export function registerAdmin(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(listRoute, async (c) =>
    c.json({ models: await c.get("services").admin.models() }, 200),
  );
  app.openapi(trafficRoute, async (c) =>
    c.json(
      await c.get("services").admin.setTraffic(c.req.valid("param").name, c.req.valid("json")),
      200,
    ),
  );
  app.openapi(rollbackRoute, async (c) =>
    c.json(await c.get("services").admin.rollback(c.req.valid("param").name), 200),
  );
}
