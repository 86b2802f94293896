import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { embeddingsRequestSchema, embeddingsResponseSchema } from "./embeddings-schemas.js";

const route = createRoute({
  method: "post",
  path: "/v1/embeddings",
  summary:
    "OpenAI-compatible embeddings on an embedder model: a text, texts or token ids in; a vector each (float, or base64 of little-endian float32), `dimensions` on Matryoshka models, usage",
  request: {
    body: { content: { "application/json": { schema: embeddingsRequestSchema } }, required: true },
  },
  responses: {
    200: json(embeddingsResponseSchema, "One embedding per input, in order"),
    ...openAiErrors,
  },
});

export function registerEmbeddings(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid("json");
    return c.json(await c.get("services").embeddings.create(body, callOptions(c, body)), 200);
  });
}
