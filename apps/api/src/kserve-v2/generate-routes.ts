import type { CompletionResult, JobEvent } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { callOptions } from "../http/call-options.js";
import { clientGone } from "../http/client-gone.js";
import { errorOf } from "../http/errors.js";
import { openStream } from "../http/job-stream.js";
import { json, v2Errors } from "../http/openapi.js";
import { sse } from "../http/sse.js";
import type { CompletionResponse } from "../openai/output-schemas.js";
import type { HonoEnv } from "../services.js";
import {
  completionOf,
  type GenerateRequest,
  generateRequestSchema,
  generateResponse,
} from "./generate-extension.js";

const responseSchema = z
  .object({
    id: z.string().optional(),
    model_name: z.string(),
    model_version: z.string(),
    text_output: z.string(),
  })
  .openapi("GenerateResponse");

const body = {
  content: { "application/json": { schema: generateRequestSchema } },
  required: true,
};
const errors = {
  400: v2Errors[400],
  404: v2Errors[404],
  429: v2Errors[429],
  503: v2Errors[503],
  504: v2Errors[504],
};
const byModel = { params: z.object({ name: z.string() }), body };
const byVersion = { params: z.object({ name: z.string(), version: z.string() }), body };

const GENERATE =
  "Triton's generate extension on a text model: `text_input` in, `text_output` out (after its input unless `exclude_input_in_output`); settings beside the text or in `parameters`: max_tokens, temperature, top_p, top_k, min_p, seed, min_tokens, the penalties, ignore_eos, stop / stop_words, bad_words";
const STREAM =
  "Triton's generate extension, streamed: the same request, each piece of text as it is made an SSE `data:` of the same response object (their text_output joined is /generate's); a failure after the first is `data: {\"error\": ...}`";
const pieces = {
  content: { "text/event-stream": { schema: z.string() } },
  description: "The pieces",
};

const generateRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/generate",
  summary: GENERATE,
  request: byModel,
  responses: { 200: json(responseSchema, "The generated text"), ...errors },
});
const generateVersionRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/versions/{version}/generate",
  summary: `${GENERATE}; on the version named (404 when the model has none by that name)`,
  request: byVersion,
  responses: { 200: json(responseSchema, "The generated text"), ...errors },
});
const generateStreamRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/generate_stream",
  summary: STREAM,
  request: byModel,
  responses: { 200: pieces, ...errors },
});
const generateStreamVersionRoute = createRoute({
  method: "post",
  path: "/v2/models/{name}/versions/{version}/generate_stream",
  summary: `${STREAM}; on the version named`,
  request: byVersion,
  responses: { 200: pieces, ...errors },
});

/**
 * The completion a request runs, the version that serves it (named, or drawn by the canary
 * split: the answer names the one that ran), and what it is called with.
 */
async function prepared(
  c: Context<HonoEnv>,
  name: string,
  named: string | undefined,
  body: GenerateRequest,
) {
  const { repository, completions } = c.get("services");
  const completion = completionOf(name, body, (raw) => completions.check(raw));
  // an unknown model or version is a 404 before anything is queued
  const { version } = repository.resolve(name, await completions.versionFor(name, named));
  const opts = { ...callOptions(c, completion), version };
  return { version, completion, opts, gone: clientGone(c) };
}

export function registerV2Generate(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(generateRoute, (c) => generate(c, c.req.valid("json"), c.req.valid("param")));
  app.openapi(generateVersionRoute, (c) => generate(c, c.req.valid("json"), c.req.valid("param")));
  app.openapi(generateStreamRoute, (c) =>
    generateStream(c, c.req.valid("json"), c.req.valid("param")),
  );
  app.openapi(generateStreamVersionRoute, (c) =>
    generateStream(c, c.req.valid("json"), c.req.valid("param")),
  );
}

interface Named {
  name: string;
  version?: string;
}

async function generate(
  c: Context<HonoEnv>,
  body: GenerateRequest,
  { name, version: named }: Named,
) {
  const { version, completion, opts, gone } = await prepared(c, name, named, body);
  const answer = (await c
    .get("services")
    .completions.complete(completion, opts, gone)) as CompletionResponse;
  return c.json(generateResponse(body, name, version, answer.choices[0]?.text ?? ""), 200);
}

async function generateStream(
  c: Context<HonoEnv>,
  body: GenerateRequest,
  { name, version: named }: Named,
) {
  const { version, completion, opts, gone } = await prepared(c, name, named, body);
  const { streams, completions } = c.get("services");
  const slot = streams.acquire(opts.tenant);
  let opened: Awaited<ReturnType<typeof openStream>>;
  try {
    opened = await openStream(c, { ...completion, stream: true }, opts, gone, slot);
  } catch (err) {
    slot.release();
    throw err;
  }
  const { job, first, events, close } = opened;
  return sse(c, async (stream) => {
    const write = async (event: JobEvent) => {
      const e = event.body;
      if (e.type === "token" && e.text)
        await stream.send({
          data: JSON.stringify(generateResponse(body, name, version, e.text)),
        });
      else if (e.type === "result") completions.countTokens(job, e.result as CompletionResult);
      else if (e.type === "error")
        await stream.send({ data: JSON.stringify({ error: errorOf(event).message }) });
    };
    try {
      try {
        if (!first.done) await write(first.value);
        for await (const event of events) await write(event);
      } finally {
        close();
      }
      if (slot.closing.aborted)
        await stream.send({
          data: JSON.stringify({
            error: `This server is shutting down; the generation goes on: follow /v1/jobs/${job.id}/events`,
          }),
        });
    } finally {
      slot.release();
    }
  });
}
