import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";

// The OpenAPI view of @ferry/protocol's ReloadOutcome (zod-openapi needs its own zod).
const outcomeSchema = z
  .object({
    worker: z.string(),
    model: z.string(),
    loaded: z.array(z.string()),
    unchanged: z.array(z.string()),
    failed: z.array(z.object({ version: z.string(), error: z.string() })),
    held: z.boolean().optional(),
  })
  .openapi("ReloadOutcome");

const route = createRoute({
  method: "post",
  path: "/admin/models/{name}/reload",
  summary:
    "Every worker reloads the model from the repository; requests in flight finish on the old files",
  request: { params: z.object({ name: z.string() }) },
  responses: {
    200: json(
      z.object({
        model: z.string(),
        versions: z.array(z.string()),
        workers: z.array(outcomeSchema),
      }),
      "What each worker loaded",
    ),
    ...openAiErrors,
  },
});

export function registerAdminReload(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) =>
    c.json(await c.get("services").admin.reload(c.req.valid("param").name), 200),
  );
}
