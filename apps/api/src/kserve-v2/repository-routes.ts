import { FerryError } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json, v2Errors } from "../http/openapi.js";
import { v2ErrorSchema } from "../http/schemas.js";
import type { HonoEnv } from "../services.js";

// Triton's model repository extension, as its explicit model control serves it: `load` is
// Ferry's reload of one model (a new model directory, new versions, changed files), `unload`
// is refused. Both are operators' actions: the admin token guards them, as it guards /admin.

const params = z.object({ name: z.string() });
const adminErrors = {
  400: v2Errors[400],
  401: json(v2ErrorSchema, "Missing or wrong admin token"),
  403: json(v2ErrorSchema, "ADMIN_TOKEN is not set"),
  404: v2Errors[404],
};

const loadRoute = createRoute({
  method: "post",
  path: "/v2/repository/models/{name}/load",
  summary:
    "Triton's model load: every worker loads or reloads the model from the repository (a model directory added since the start included), and every API replica serves what they accepted; empty 200 as Triton answers. A body `{\"parameters\": {...}}` may be sent, none set: Triton's `config` and `file:` overrides are refused by name",
  request: { params },
  responses: { 200: { description: "Loaded (no body)" }, ...adminErrors },
});

const unloadRoute = createRoute({
  method: "post",
  path: "/v2/repository/models/{name}/unload",
  summary:
    "Triton's model unload: refused (400). A model is served by the workers whose WORKER_MODELS name it, or all when unset",
  request: { params },
  responses: adminErrors,
});

/** The request's `parameters`, an empty body or none allowed; every one named is refused. */
function refuseParameters(text: string): void {
  if (text.trim() === "") return;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new FerryError("INVALID_INPUT", "The body is not JSON");
  }
  const parameters = (body as { parameters?: unknown } | null)?.parameters;
  if (parameters === undefined || parameters === null) return;
  if (typeof parameters !== "object" || Array.isArray(parameters))
    throw new FerryError("INVALID_INPUT", "parameters must be an object");
  const named = Object.keys(parameters);
  if (named.length > 0)
    throw new FerryError(
      "INVALID_INPUT",
      `Load parameter '${named[0]}' is not served: a model loads from its directory in the repository as it stands (Triton's 'config' and 'file:' overrides are not)`,
    );
}

export function registerV2Repository(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(loadRoute, async (c) => {
    refuseParameters(await c.req.text());
    await c.get("services").admin.reload(c.req.valid("param").name);
    return c.body(null, 200);
  });
  app.openapi(unloadRoute, async (c) => {
    const name = c.req.valid("param").name;
    c.get("services").repository.get(name); // an unknown model is a 404, as a load's
    throw new FerryError(
      "INVALID_INPUT",
      `Model unload is not served: '${name}' is served by every worker whose WORKER_MODELS names it (or is unset); to stop serving it, take it out of their WORKER_MODELS, or its directory out of the repository, and restart them`,
    );
  });
}
