import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv, Services } from "../services.js";
import { validateSplit } from "../traffic-router.js";
import { json, openAiErrors } from "./responses.js";

const versionStats = z.object({
  requests: z.number(),
  errors: z.number(),
  error_rate: z.number().nullable(),
  p50_ms: z.number().nullable(),
  p95_ms: z.number().nullable(),
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

async function describe(
  services: Services,
  name: string,
): Promise<z.infer<typeof modelAdminSchema>> {
  const entry = services.repository.get(name);
  const state = services.client.state;
  await state.flush();
  const [split, stats] = await Promise.all([state.getTraffic(name), state.stats(name)]);
  const { hits, misses } = stats.cache;
  return {
    name,
    kind: entry.config.kind,
    versions: entry.versions,
    stable_version: entry.defaultVersion,
    traffic: split ?? { [entry.defaultVersion]: 100 },
    stats: Object.fromEntries(
      Object.entries(stats.versions).map(([v, s]) => [
        v,
        { ...s, error_rate: s.requests ? s.errors / s.requests : null },
      ]),
    ),
    cache: { hits, misses, hit_rate: hits + misses > 0 ? hits / (hits + misses) : null },
    fallbacks: stats.fallbacks,
  };
}

export function registerAdmin(app: OpenAPIHono<AppEnv>): void {
  app.openapi(listRoute, async (c) => {
    const services = c.get("services");
    const models = await Promise.all(
      services.repository.list().map((m) => describe(services, m.config.name)),
    );
    return c.json({ models }, 200);
  });
  app.openapi(trafficRoute, async (c) => {
    const services = c.get("services");
    const { name } = c.req.valid("param");
    const entry = services.repository.get(name);
    await services.client.state.setTraffic(name, validateSplit(entry, c.req.valid("json")));
    services.log.info({ model: name, traffic: c.req.valid("json") }, "traffic split changed");
    return c.json(await describe(services, name), 200);
  });
  app.openapi(rollbackRoute, async (c) => {
    const services = c.get("services");
    const { name } = c.req.valid("param");
    const entry = services.repository.get(name);
    await services.client.state.setTraffic(name, { [entry.defaultVersion]: 100 });
    services.log.warn(
      { model: name, version: entry.defaultVersion },
      "rolled back to the stable version",
    );
    return c.json(await describe(services, name), 200);
  });
}
