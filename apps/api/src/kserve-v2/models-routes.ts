import type { ModelEntry } from "@ferry/model-repository";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json, v2Errors } from "../http/openapi.js";
import type { HonoEnv, Services } from "../services.js";
import { embedderTensors } from "./embedder-tensors.js";
import { v2ModelMetadataSchema } from "./schemas.js";

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

const tritonTensor = z.object({
  name: z.string(),
  data_type: z.string(),
  dims: z.array(z.number()),
});

const tritonConfigSchema = z
  .object({
    name: z.string(),
    platform: z.string(),
    backend: z.string(),
    version_policy: z.object({ specific: z.object({ versions: z.array(z.number()) }) }),
    max_batch_size: z.number(),
    input: z.array(tritonTensor),
    output: z.array(tritonTensor),
    /** A classifier's (a text model batches by decode step instead). */
    dynamic_batching: z
      .object({
        preferred_batch_size: z.array(z.number()),
        max_queue_delay_microseconds: z.number(),
        default_queue_policy: z.object({
          default_timeout_microseconds: z.number(),
          max_queue_size: z.number(),
        }),
      })
      .optional(),
    instance_group: z
      .array(z.object({ name: z.string(), kind: z.string(), count: z.number() }))
      .optional(),
    default_model_filename: z.string(),
  })
  .openapi("TritonModelConfig");

const configRoute = createRoute({
  method: "get",
  path: "/v2/models/{name}/config",
  summary:
    "Triton's model configuration extension: model.json as Triton's config.pbtxt reads in JSON (max_batch_size, inputs and outputs, dynamic batching, instance group)",
  request: { params: z.object({ name: z.string() }) },
  responses: {
    200: json(tritonConfigSchema, "The configuration"),
    404: v2Errors[404],
  },
});

const indexRoute = createRoute({
  method: "post",
  path: "/v2/repository/index",
  summary:
    "Triton's model repository index: every version of every model, READY where a live worker serves it, else UNAVAILABLE with the reason",
  responses: {
    200: json(
      z
        .array(
          z.object({
            name: z.string(),
            version: z.string(),
            state: z.enum(["READY", "UNAVAILABLE"]),
            reason: z.string(),
          }),
        )
        .openapi("RepositoryIndex"),
      "The index",
    ),
  },
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
  const tensors = (specs: ReadonlyArray<{ name: string; datatype: string; dims: number[] }>) =>
    specs.map((t) => ({ name: t.name, datatype: t.datatype, shape: [-1, ...t.dims] }));
  const served = servedTensors(entry.config);
  return {
    name: entry.config.name,
    versions,
    platform: entry.config.platform,
    inputs: tensors(served.inputs),
    outputs: tensors(served.outputs),
  };
}

/** What v2 infer takes and gives: the graph's tensors, an embedder's texts and vectors. */
function servedTensors(config: ModelEntry["config"]) {
  return config.kind === "embedder" ? embedderTensors(config) : config;
}

/**
 * A model's configuration as Triton writes its own in JSON (config.pbtxt's fields, protobuf's
 * JSON names: `TYPE_FP32`, microseconds), from model.json: what tritonclient's
 * `get_model_config` and the tools built on it (max_batch_size, the tensors) read.
 */
function tritonConfig(entry: ModelEntry) {
  const config = entry.config;
  const tensors = (specs: ReadonlyArray<{ name: string; datatype: string; dims: number[] }>) =>
    specs.map((t) => ({
      name: t.name,
      data_type: `TYPE_${t.datatype === "BYTES" ? "STRING" : t.datatype}`,
      dims: t.dims,
    }));
  // a classifier's or an embedder's rows are batched dynamically
  const classifier = config.kind !== "generator";
  return {
    name: config.name,
    platform: config.platform,
    backend: "onnxruntime",
    version_policy: { specific: { versions: entry.versions.map(Number) } },
    max_batch_size: config.max_batch_size,
    input: tensors(servedTensors(config).inputs),
    output: tensors(servedTensors(config).outputs),
    ...(classifier
      ? {
          dynamic_batching: {
            preferred_batch_size: config.dynamic_batching.preferred_batch_sizes,
            max_queue_delay_microseconds: Math.round(
              config.dynamic_batching.max_queue_delay_ms * 1000,
            ),
            default_queue_policy: {
              default_timeout_microseconds: config.default_timeout_ms * 1000,
              max_queue_size: config.max_queue_size,
            },
          },
          instance_group: [{ name: config.name, kind: "KIND_CPU", count: config.instance_count }],
        }
      : {}),
    default_model_filename: "model.onnx",
  };
}

export function registerV2Models(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(serverRoute, (c) =>
    c.json(
      {
        name: "ferry",
        version: "0.1.0",
        extensions: ["binary_tensor_data", "classification", "model_configuration", "statistics"],
      },
      200,
    ),
  );
  app.openapi(metadataRoute, (c) => {
    const entry = c.get("services").repository.get(c.req.valid("param").name);
    return c.json(metadataOf(entry, entry.versions), 200);
  });
  app.openapi(indexRoute, async (c) =>
    c.json(await c.get("services").health.repositoryIndex(), 200),
  );
  app.openapi(configRoute, (c) =>
    c.json(tritonConfig(c.get("services").repository.get(c.req.valid("param").name)), 200),
  );
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
