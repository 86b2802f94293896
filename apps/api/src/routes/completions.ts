import type { CompletionResult } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../call-options.js";
import { errorOf } from "../completion-service.js";
import { completionRequestSchema, completionResponseSchema, modelListSchema } from "../schemas.js";
import type { AppEnv } from "../services.js";
import { sse } from "../sse.js";
import { json, openAiErrors } from "./responses.js";

const modelsRoute = createRoute({
  method: "get",
  path: "/v1/models",
  summary: "Every model in the repository, in OpenAI's list shape",
  responses: { 200: json(modelListSchema, "Models") },
});

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

export function registerCompletions(app: OpenAPIHono<AppEnv>): void {
  app.openapi(modelsRoute, (c) => {
    const data = c
      .get("services")
      .repository.list()
      .map((m) => ({
        id: m.config.name,
        object: "model" as const,
        created: 0,
        owned_by: "ferry",
      }));
    return c.json({ object: "list" as const, data }, 200);
  });

  app.openapi(completionsRoute, async (c) => {
    const body = c.req.valid("json");
    const { completions, client } = c.get("services");
    const { requestId, priority } = callOptions(c, body);
    if (!body.stream) return c.json(await completions.complete(body, requestId, priority), 200);
    const reading = new AbortController();
    const {
      record: job,
      events,
      close,
    } = await completions.follow(body, requestId, priority, reading.signal);
    const includeUsage = body.stream_options?.include_usage === true;
    return sse(c, async (stream) => {
      // A client that goes away frees its batch slot: the job is cancelled on every worker.
      stream.onAbort(() => {
        reading.abort();
        void client.jobs.cancel(job.id).catch(() => undefined);
      });
      const send = (payload: unknown) => stream.send({ data: JSON.stringify(payload) });
      try {
        for await (const event of events) {
          const e = event.body;
          if (e.type === "token")
            await send(completions.chunk(job.id, job.model, job.created_at, e.text, null));
          else if (e.type === "result") {
            const result = e.result as CompletionResult;
            const finish = result.finish_reason === "length" ? "length" : "stop";
            await send(completions.chunk(job.id, job.model, job.created_at, "", finish));
            if (includeUsage)
              await send({
                ...completions.chunk(job.id, job.model, job.created_at, "", null),
                choices: [],
                usage: result.usage,
              });
          } else if (e.type === "error") {
            const err = errorOf(event);
            await send({
              error: { message: err.message, type: "server_error", code: err.code.toLowerCase() },
            });
          }
        }
      } finally {
        close();
      }
      if (!reading.signal.aborted) await stream.send({ data: "[DONE]" });
    });
  });
}
