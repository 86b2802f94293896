import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../call-options.js";
import { v2InferRequestSchema, v2InferResponseSchema } from "../schemas.js";
import type { AppEnv } from "../services.js";
import { json, v2Errors } from "./responses.js";

const body = { content: { "application/json": { schema: v2InferRequestSchema } }, required: true };
const responses = {
  200: json(v2InferResponseSchema, "Output tensors, batch axis first"),
  ...v2Errors,
};

const inferRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/infer",
  summary: "KServe v2 inference on the model's current version",
  request: { params: z.object({ name: z.string() }), body },
  responses,
});

const inferVersionRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/versions/{version}/infer",
  summary: "KServe v2 inference pinned to one version",
  request: { params: z.object({ name: z.string(), version: z.string() }), body },
  responses,
});

export function registerV2Infer(app: OpenAPIHono<AppEnv>): void {
  app.openapi(inferRoute, async (c) => {
    const req = c.req.valid("json");
    const opts = callOptions(c, req.parameters ?? {});
    return c.json(
      await c
        .get("services")
        .inference.inferV2(c.req.valid("param").name, c.get("admittedVersion"), req, opts),
      200,
    );
  });
  app.openapi(inferVersionRoute, async (c) => {
    const req = c.req.valid("json");
    const { name, version } = c.req.valid("param");
    const opts = callOptions(c, req.parameters ?? {});
    return c.json(await c.get("services").inference.inferV2(name, version, req, opts), 200);
  });
}
