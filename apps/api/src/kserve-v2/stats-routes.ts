import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json, v2Errors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { tritonStatistics } from "./triton-stats.js";

const duration = z.object({ count: z.number(), ns: z.number() });

const statisticsSchema = z
  .object({
    model_stats: z.array(
      z.object({
        name: z.string(),
        version: z.string(),
        last_inference: z.number(),
        inference_count: z.number(),
        execution_count: z.number(),
        inference_stats: z.record(z.string(), duration),
        batch_stats: z.array(
          z.object({
            batch_size: z.number(),
            compute_input: duration,
            compute_infer: duration,
            compute_output: duration,
          }),
        ),
        memory_usage: z.array(
          z.object({ type: z.string(), id: z.number(), byte_size: z.number() }),
        ),
      }),
    ),
  })
  .openapi("TritonStatistics");

const summary =
  "Triton's statistics extension: per version, requests answered and failed with their durations, the queue wait and compute time of computed rows, executions in all and by batch size, cache hits and misses; the deployment's counts (every API replica and worker adds its own once a second)";

const allRoute = createRoute({
  method: "get",
  path: "/v2/models/stats",
  summary: `${summary}: every model`,
  responses: { 200: json(statisticsSchema, "The statistics") },
});

const modelRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/stats",
  summary: `${summary}: every version of one model`,
  request: { params: z.object({ name: z.string() }) },
  responses: { 200: json(statisticsSchema, "The statistics"), 404: v2Errors[404] },
});

const versionRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/versions/{version}/stats",
  summary: `${summary}: one version`,
  request: { params: z.object({ name: z.string(), version: z.string() }) },
  responses: { 200: json(statisticsSchema, "The statistics"), 404: v2Errors[404] },
});

export function registerV2Stats(app: OpenAPIHono<HonoEnv>): void {
  const stats = (services: HonoEnv["Variables"]["services"], name?: string, version?: string) =>
    tritonStatistics(services.repository, services.client.stats, name, version);
  app.openapi(allRoute, async (c) => c.json(await stats(c.get("services")), 200));
  app.openapi(modelRoute, async (c) =>
    c.json(await stats(c.get("services"), c.req.valid("param").name), 200),
  );
  app.openapi(versionRoute, async (c) => {
    const { name, version } = c.req.valid("param");
    return c.json(await stats(c.get("services"), name, version), 200);
  });
}
