import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { clientGone } from "../http/client-gone.js";
import { idempotently, jsonFingerprint } from "../http/idempotency.js";
import { idempotencyErrors, idempotencyHeaders, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { responseId } from "./responses-render.js";
import { responsesRequestSchema } from "./responses-schemas.js";
import { streamResponse, streamStoredResponse } from "./responses-stream.js";

const responseSchema = z.record(z.string(), z.unknown()).openapi("Response");

/** A response as JSON, or (`stream`) its events. */
const responseOrStream = {
  content: {
    "application/json": { schema: responseSchema },
    "text/event-stream": { schema: z.string() },
  },
  description: "The response, or its stream of events",
};

const createResponseRoute = createRoute({
  method: "post",
  path: "/v1/responses",
  summary:
    "OpenAI's Responses API on the chat: messages (or a string) in, a message out; `previous_response_id` continues a stored response's conversation; `stream: true` answers with Responses events (response.created ... response.output_text.delta ... response.completed); `background: true` queues it as a job that outlives the request (streamed too with `stream: true`, and resumable; an Idempotency-Key makes its retry safe)",
  request: {
    headers: idempotencyHeaders,
    body: { content: { "application/json": { schema: responsesRequestSchema } }, required: true },
  },
  responses: {
    200: responseOrStream,
    ...openAiErrors,
    ...idempotencyErrors,
  },
});

const getRoute = createRoute({
  method: "get",
  path: "/v1/responses/{id}",
  summary:
    "A stored response as it stands (queued, in progress, completed...), while its job is kept; a background one with `stream=true` is streamed from its start, or from after the event `starting_after` numbers (a client resuming)",
  request: {
    params: z.object({ id: z.string() }),
    query: z.object({
      stream: z.enum(["true", "false"]).optional(),
      starting_after: z.coerce.number().int().min(0).optional(),
    }),
  },
  responses: {
    200: responseOrStream,
    400: openAiErrors[400],
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

const inputItemsRoute = createRoute({
  method: "get",
  path: "/v1/responses/{id}/input_items",
  summary:
    "The items a stored response was given: its whole conversation (earlier turns and their answers included, instructions left out), a page at a time (`limit` 1-100, default 20; `order` desc by default; `after` an item id)",
  request: {
    params: z.object({ id: z.string() }),
    query: z.object({
      after: z.string().optional(),
      limit: z.coerce.number().int().min(1).max(100).default(20),
      order: z.enum(["asc", "desc"]).default("desc"),
    }),
  },
  responses: {
    200: {
      content: {
        "application/json": {
          schema: z.record(z.string(), z.unknown()).openapi("ResponseItemList"),
        },
      },
      description: "A page of the response's input items",
    },
    400: openAiErrors[400],
    404: openAiErrors[404],
  },
});

const deleteRoute = createRoute({
  method: "delete",
  path: "/v1/responses/{id}",
  summary:
    "Deletes a stored response (cancelled first if still queued or running): it reads as unknown from then on and cannot be continued",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: {
      content: {
        "application/json": {
          schema: z.object({
            id: z.string(),
            object: z.literal("response"),
            deleted: z.literal(true),
          }),
        },
      },
      description: "The response is deleted",
    },
    404: openAiErrors[404],
  },
});

export function registerResponses(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(createResponseRoute, async (c) => {
    const body = c.req.valid("json");
    const opts = callOptions(c, body);
    const gone = clientGone(c);
    const { responses } = c.get("services");
    if (!body.background) {
      if (!body.stream) return c.json(await responses.create(body, opts, gone), 200);
      return streamResponse(c, body, opts, gone);
    }
    // a background response is created and stored: a retry with its Idempotency-Key gets it
    // again rather than a second one
    const tenant = opts.tenant;
    const again = (jobId: string) => responses.streamable(responseId(jobId), tenant);
    return idempotently(
      c,
      await jsonFingerprint(c),
      async ({ createdId, takeover }) => {
        const keyed = { ...opts, createdId };
        const found =
          takeover && createdId ? await again(createdId).catch(() => undefined) : undefined;
        if (!body.stream) {
          if (found) return c.json(await responses.get(responseId(found.job.id), tenant), 200);
          return c.json(await responses.create(body, keyed, gone), 200);
        }
        return streamStoredResponse(c, async () => {
          if (found) return found;
          const prepared = await responses.prepare(body, tenant);
          return { job: await responses.queue(prepared, keyed), meta: prepared.meta };
        });
      },
      { replay: (jobId) => streamStoredResponse(c, () => again(jobId)) },
    );
  });
  app.openapi(cancelRoute, async (c) =>
    c.json(await c.get("services").responses.cancel(c.req.valid("param").id, c.get("tenant")), 200),
  );
  app.openapi(inputItemsRoute, async (c) =>
    c.json(
      await c
        .get("services")
        .responses.inputItems(c.req.valid("param").id, c.get("tenant"), c.req.valid("query")),
      200,
    ),
  );
  app.openapi(deleteRoute, async (c) =>
    c.json(await c.get("services").responses.delete(c.req.valid("param").id, c.get("tenant")), 200),
  );
  app.openapi(getRoute, async (c) => {
    const { id } = c.req.valid("param");
    const { stream, starting_after } = c.req.valid("query");
    const { responses } = c.get("services");
    if (stream !== "true") return c.json(await responses.get(id, c.get("tenant")), 200);
    return streamStoredResponse(c, () => responses.streamable(id, c.get("tenant")), starting_after);
  });
}
