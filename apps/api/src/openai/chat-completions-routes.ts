import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { clientGone } from "../http/client-gone.js";
import { openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { severalChoices } from "./choices.js";
import { streamEach, streamGeneration } from "./generation-stream.js";
import { chatStream } from "./openai-render.js";
import { chatCompletionResponseSchema } from "./output-schemas.js";
import { chatCompletionRequestSchema } from "./schemas.js";

const route = createRoute({
  method: "post",
  path: "/v1/chat/completions",
  summary:
    "OpenAI-compatible chat: the model's chat template renders the messages; `stream: true` answers with `chat.completion.chunk` SSE and `data: [DONE]`; streamed or not, X-Job-Id names the job (its events readable through /v1/jobs/{id}/events)",
  request: {
    body: {
      content: { "application/json": { schema: chatCompletionRequestSchema } },
      required: true,
    },
  },
  responses: {
    200: {
      content: {
        "application/json": { schema: chatCompletionResponseSchema },
        "text/event-stream": { schema: z.string() },
      },
      description: "The chat completion, or its stream of chunks",
    },
    ...openAiErrors,
  },
});

export function registerChatCompletions(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid("json");
    const opts = callOptions(c, body);
    const gone = clientGone(c);
    if (!body.stream)
      return c.json(await c.get("services").completions.complete(body, opts, gone), 200);
    const several = severalChoices(body);
    if (several) return streamEach(c, body, several, opts, gone, chatStream);
    return streamGeneration(c, body, opts, gone, chatStream);
  });
}
