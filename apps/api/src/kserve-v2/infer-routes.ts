import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { callOptions } from "../http/call-options.js";
import { invalidInput } from "../http/errors.js";
import { WEIGHT } from "../http/json-weight.js";
import { v2Errors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { binaryAnswer, readBinaryRequest } from "./binary.js";
import {
  type V2InferRequest,
  v2CallBody,
  v2InferRequestSchema,
  v2InferResponseSchema,
} from "./schemas.js";

const body = { content: { "application/json": { schema: v2InferRequestSchema } }, required: true };
const responses = {
  200: {
    content: {
      "application/json": { schema: v2InferResponseSchema },
      "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) },
    },
    description:
      "Output tensors, batch axis first; with outputs asked for as binary (Triton's binary_data), the JSON (Inference-Header-Content-Length bytes) and then their bytes",
  },
  ...v2Errors,
};

const inferRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/infer",
  summary:
    "KServe v2 inference on the model's current version (Triton's binary tensor data and classification extensions included)",
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

/** Runs a request on the version its path pins, else the one admission drew. */
async function answer(c: Context<HonoEnv>, req: V2InferRequest, version: string | undefined) {
  const opts = callOptions(c, v2CallBody(req.parameters));
  const name = c.req.param("name") ?? "";
  const answered = await c
    .get("services")
    .v2.infer(name, version ?? c.get("admittedVersion"), req, opts);
  const binary = binaryAnswer(req, answered);
  if (!binary) return c.json(answered, 200);
  return c.body(new Uint8Array(binary.body), 200, {
    "Content-Type": "application/octet-stream",
    "Inference-Header-Content-Length": String(binary.headerLength),
  });
}

export function registerV2Infer(app: OpenAPIHono<HonoEnv>): void {
  // Triton's binary tensor data: a body that is not all JSON, so not the routes' JSON validator
  for (const path of ["/v2/models/:name/infer", "/v2/models/:name/versions/:version/infer"])
    app.use(path, async (c, next) => {
      const headerLength = c.req.header("Inference-Header-Content-Length");
      if (headerLength === undefined) return next();
      const raw = new Uint8Array(await c.req.arrayBuffer());
      const weighMore = c.get("weighMore");
      const parsed = v2InferRequestSchema.safeParse(
        readBinaryRequest(raw, headerLength, (elements, texts) =>
          weighMore?.(elements * WEIGHT.element + texts * WEIGHT.string),
        ),
      );
      if (!parsed.success) throw invalidInput(parsed.error.issues);
      return answer(c, parsed.data, c.req.param("version"));
    });
  app.openapi(inferRoute, (c) => answer(c, c.req.valid("json"), undefined));
  app.openapi(inferVersionRoute, (c) =>
    answer(c, c.req.valid("json"), c.req.valid("param").version),
  );
}
