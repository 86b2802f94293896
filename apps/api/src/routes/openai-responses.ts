import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../call-options.js";
import { clientGone } from "../generation-stream.js";
import { responsesRequestSchema } from "../responses-schemas.js";
import { streamResponse } from "../responses-stream.js";
import type { AppEnv } from "../services.js";
import { openAiErrors } from "./responses.js";

const responseSchema = z.record(z.string(), z.unknown()).openapi("Response");

const createResponseRoute = createRoute({
  method: "post",
  path: "/v1/responses",
  summary:
    "OpenAI's Responses API on the chat: messages (or a string) in, a message out; `previous_response_id` continues a stored response's conversation; `stream: true` answers with Responses events (response.created ... response.output_text.delta ... response.completed)",
  request: {
    body: { content: { "application/json": { schema: responsesRequestSchema } }, required: true },
  },
  responses: {
    200: {
      content: {
        "application/json": { schema: responseSchema },
        "text/event-stream": { schema: z.string() },
      },
      description: "The response, or its stream of events",
    },
    ...openAiErrors,
  },
});

const getRoute = createRoute({
  method: "get",
  path: "/v1/responses/{id}",
  summary:
    "A stored response as it stands (queued, in progress, completed...), while its job is kept",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: {
      content: { "application/json": { schema: responseSchema } },
      description: "The response",
    },
    404: openAiErrors[404],
  },
});

const cancelRoute = createRoute({
  method: "post",
  path: "/v1/responses/{id}/cancel",
  summary: "Cancels a background response: queued, it never runs; running, it stops",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: {
      content: { "application/json": { schema: responseSchema } },
      description: "The response, cancelled",
    },
    400: openAiErrors[400],
    404: openAiErrors[404],
  },
});

export function registerResponses(app: OpenAPIHono<AppEnv>): void {
  app.openapi(createResponseRoute, async (c) => {
    const body = c.req.valid("json");
    const opts = callOptions(c, body);
    const gone = clientGone(c);
    const { responses } = c.get("services");
    if (!body.stream) return c.json(await responses.create(body, opts, gone), 200);
    return streamResponse(c, body, opts, gone);
  });
  app.openapi(cancelRoute, async (c) =>
    c.json(await c.get("services").responses.cancel(c.req.valid("param").id, c.get("tenant")), 200),
  );
  app.openapi(getRoute, async (c) =>
    c.json(await c.get("services").responses.get(c.req.valid("param").id, c.get("tenant")), 200),
  );
}
