import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { v2ModelMetadataSchema } from "../schemas.js";
import type { AppEnv, Services } from "../services.js";
import { json, v2Errors } from "./responses.js";

const serverMetadataSchema = z
  .object({ name: z.string(), version: z.string(), extensions: z.array(z.string()) })
  .openapi("ServerMetadata");

const serverRoute = createRoute({
  method: "get",
  path: "/v2",
  summary: "Server metadata (KServe Open Inference Protocol)",
  responses: { 200: json(serverMetadataSchema, "Name, version and protocol extensions") },
});

const readySchema = z.object({ name: z.string(), version: z.string(), ready: z.boolean() });

const metadataRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}",
  summary: "Model metadata: versions, inputs and outputs",
  request: { params: z.object({ name: z.string() }) },
  responses: { 200: json(v2ModelMetadataSchema, "Model metadata"), 404: v2Errors[404] },
});

const readyRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/ready",
  summary: "200 when a live worker serves the model's current version, else 503",
  request: { params: z.object({ name: z.string() }) },
  responses: {
    200: json(readySchema, "Ready"),
    503: json(readySchema, "No live worker"),
    404: v2Errors[404],
  },
});

const versionReadyRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/versions/{version}/ready",
  summary: "200 when a live worker serves this version, else 503",
  request: { params: z.object({ name: z.string(), version: z.string() }) },
  responses: {
    200: json(readySchema, "Ready"),
    503: json(readySchema, "No live worker"),
    404: v2Errors[404],
  },
});

export function registerV2Models(app: OpenAPIHono<AppEnv>): void {
  app.openapi(serverRoute, (c) => c.json({ name: "ferry", version: "0.1.0", extensions: [] }, 200));
  app.openapi(metadataRoute, (c) => {
    const entry = c.get("services").repository.get(c.req.valid("param").name);
    const shape = (dims: number[]) => [-1, ...dims];
    return c.json(
      {
        name: entry.config.name,
        versions: entry.versions,
        platform: entry.config.platform,
        inputs: entry.config.inputs.map((t) => ({
          name: t.name,
          datatype: t.datatype,
          shape: shape(t.dims),
        })),
        outputs: entry.config.outputs.map((t) => ({
          name: t.name,
          datatype: t.datatype,
          shape: shape(t.dims),
        })),
      },
      200,
    );
  });
  const answer = async (services: Services, name: string, version: string | undefined) => {
    const { version: v, ready } = await services.health.modelReady(name, version);
    return {
      body: { name, version: v, ready },
      status: ready ? (200 as const) : (503 as const),
    };
  };
  app.openapi(readyRoute, async (c) => {
    const { body, status } = await answer(c.get("services"), c.req.valid("param").name, undefined);
    return c.json(body, status);
  });
  app.openapi(versionReadyRoute, async (c) => {
    const { name, version } = c.req.valid("param");
    const { body, status } = await answer(c.get("services"), name, version);
    return c.json(body, status);
  });
}
