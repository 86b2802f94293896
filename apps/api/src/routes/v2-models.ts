import type { ModelEntry } from "@ferry/model-repository";
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

const versionMetadataRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/versions/{version}",
  summary: "One version's metadata: its inputs and outputs",
  request: { params: z.object({ name: z.string(), version: z.string() }) },
  responses: { 200: json(v2ModelMetadataSchema, "Model metadata"), 404: v2Errors[404] },
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

/** KServe's model metadata: the versions it answers for, inputs and outputs batch axis first. */
function metadataOf(entry: ModelEntry, versions: string[]) {
  const tensors = (specs: ModelEntry["config"]["inputs"]) =>
    specs.map((t) => ({ name: t.name, datatype: t.datatype, shape: [-1, ...t.dims] }));
  return {
    name: entry.config.name,
    versions,
    platform: entry.config.platform,
    inputs: tensors(entry.config.inputs),
    outputs: tensors(entry.config.outputs),
  };
}

export function registerV2Models(app: OpenAPIHono<AppEnv>): void {
  app.openapi(serverRoute, (c) =>
    c.json(
      { name: "ferry", version: "0.1.0", extensions: ["binary_tensor_data", "classification"] },
      200,
    ),
  );
  app.openapi(metadataRoute, (c) => {
    const entry = c.get("services").repository.get(c.req.valid("param").name);
    return c.json(metadataOf(entry, entry.versions), 200);
  });
  app.openapi(versionMetadataRoute, (c) => {
    const { name, version } = c.req.valid("param");
    // an unknown version is a 404, as it is to infer
    const { entry, version: v } = c.get("services").repository.resolve(name, version);
    return c.json(metadataOf(entry, [v]), 200);
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
