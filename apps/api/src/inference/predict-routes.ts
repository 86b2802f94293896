import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { predictBodySchema, predictResponseSchema } from "./schemas.js";

const route = createRoute({
  method: "post",
  path: "/v1/models/{name}/predict",
  summary: "Classify one feature vector",
  request: {
    params: z.object({ name: z.string() }),
    body: { content: { "application/json": { schema: predictBodySchema } }, required: true },
  },
  responses: {
    200: json(predictResponseSchema, "The predicted class and its probability"),
    ...openAiErrors,
  },
});

export function registerPredict(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid("json");
    const { inference } = c.get("services");
    const result = await inference.predict(
      c.req.valid("param").name,
      c.get("admittedVersion"),
      body,
      callOptions(c, body),
    );
    return c.json(result, 200);
  });
}
