import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import {
  detokenizeRequestSchema,
  detokenizeResponseSchema,
  tokenizeRequestSchema,
  tokenizeResponseSchema,
} from "./tokenize-schemas.js";

const body = <T>(schema: T) => ({
  body: { content: { "application/json": { schema } }, required: true },
});

const tokenizeRoute = createRoute({
  method: "post",
  path: "/tokenize",
  summary:
    "vLLM's tokenize: a prompt's tokens as /v1/completions runs them, or messages' as /v1/chat/completions renders them (the count is the chat's usage.prompt_tokens)",
  request: body(tokenizeRequestSchema),
  responses: {
    200: json(tokenizeResponseSchema, "The tokens, their count and the model's context window"),
    ...openAiErrors,
  },
});

const detokenizeRoute = createRoute({
  method: "post",
  path: "/detokenize",
  summary: "vLLM's detokenize: token ids back into text, special tokens included",
  request: body(detokenizeRequestSchema),
  responses: { 200: json(detokenizeResponseSchema, "The text"), ...openAiErrors },
});

export function registerTokenize(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(tokenizeRoute, async (c) =>
    c.json(await c.get("services").tokenization.tokenize(c.req.valid("json")), 200),
  );
  app.openapi(detokenizeRoute, async (c) =>
    c.json(await c.get("services").tokenization.detokenize(c.req.valid("json")), 200),
  );
}
