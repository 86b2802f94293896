import type { ModelEntry } from "@ferry/model-repository";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { clientGone } from "../http/client-gone.js";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { severalChoices } from "./choices.js";
import { streamEach, streamGeneration } from "./generation-stream.js";
import { completionStream } from "./openai-render.js";
import { completionResponseSchema, modelCardSchema, modelListSchema } from "./output-schemas.js";
import { completionRequestSchema } from "./schemas.js";

const modelsRoute = createRoute({
  method: "get",
  path: "/v1/models",
  summary: "Every model in the repository, in OpenAI's list shape",
  responses: { 200: json(modelListSchema, "Models") },
});

const modelRoute = createRoute({
  method: "get",
  path: "/v1/models/{id}",
  summary: "One model, in OpenAI's shape",
  request: { params: z.object({ id: z.string() }) },
  responses: { 200: json(modelCardSchema, "The model"), 404: openAiErrors[404] },
});

/** A model as OpenAI lists it, with vLLM's `max_model_len` (the context window) for generators. */
function modelCard(entry: ModelEntry) {
  const context = entry.config.architecture?.context_length;
  return {
    id: entry.config.name,
    object: "model" as const,
    created: entry.created,
    owned_by: "ferry",
    ...(typeof context === "number" ? { max_model_len: context } : {}),
  };
}

const completionsRoute = createRoute({
  method: "post",
  path: "/v1/completions",
  summary:
    "OpenAI-compatible text completion; `stream: true` answers with SSE chunks and `data: [DONE]`",
  request: {
    body: { content: { "application/json": { schema: completionRequestSchema } }, required: true },
  },
  responses: {
    200: {
      content: {
        "application/json": { schema: completionResponseSchema },
        "text/event-stream": { schema: z.string() },
      },
      description: "The completion, or its stream of chunks",
    },
    ...openAiErrors,
  },
});

export function registerCompletions(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(modelsRoute, (c) => {
    const data = c.get("services").repository.list().map(modelCard);
    return c.json({ object: "list" as const, data }, 200);
  });
  app.openapi(modelRoute, (c) =>
    c.json(modelCard(c.get("services").repository.get(c.req.valid("param").id)), 200),
  );

  app.openapi(completionsRoute, async (c) => {
    const body = c.req.valid("json");
    const opts = callOptions(c, body);
    const gone = clientGone(c);
    if (!body.stream)
      return c.json(await c.get("services").completions.complete(body, opts, gone), 200);
    const several = severalChoices(body);
    if (several) return streamEach(c, body, several, opts, gone, completionStream);
    return streamGeneration(c, body, opts, gone, completionStream);
  });
}
