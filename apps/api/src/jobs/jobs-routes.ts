import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { callOptions } from "../http/call-options.js";
import { idempotently, jsonFingerprint } from "../http/idempotency.js";
import { idempotencyErrors, idempotencyHeaders, json, openAiErrors } from "../http/openapi.js";
import { modelBodyTooLarge } from "../middleware/body-limits.js";
import type { HonoEnv } from "../services.js";
import { jobAcceptedSchema, jobBodySchema, jobRecordSchema } from "./schemas.js";

const idParams = z.object({ id: z.string() });

const submitRoute = createRoute({
  method: "post",
  path: "/v1/jobs",
  summary: "Submit an inference job; poll it or follow its events",
  request: {
    headers: idempotencyHeaders,
    body: { content: { "application/json": { schema: jobBodySchema } }, required: true },
  },
  responses: { 202: json(jobAcceptedSchema, "Queued"), ...openAiErrors, ...idempotencyErrors },
});

const getRoute = createRoute({
  method: "get",
  path: "/v1/jobs/{id}",
  summary: "A job's status, timestamps (Unix seconds) and result",
  request: { params: idParams },
  responses: {
    200: json(jobRecordSchema, "The job"),
    404: openAiErrors[404],
    503: openAiErrors[503],
  },
});

const cancelRoute = createRoute({
  method: "delete",
  path: "/v1/jobs/{id}",
  summary: "Cancel: a queued job never runs, a running one stops",
  request: { params: idParams },
  responses: {
    200: json(jobRecordSchema, "The job after the cancel"),
    404: openAiErrors[404],
    503: openAiErrors[503],
  },
});

export function registerJobs(app: OpenAPIHono<HonoEnv>): void {
  app.openapi(submitRoute, async (c) => {
    const body = c.req.valid("json");
    const { jobs, inference } = c.get("services");
    // a classifier's input is held to what the model could need before it is walked or
    // fingerprinted, as on its sync routes (only the envelope has been read: 8 MiB of v2 data
    // had been checked value by value, seconds of the API's loop, before its shape was refused)
    const maxBytes = inference.maxBodyBytes(body.model);
    const declared = Number(c.req.header("Content-Length"));
    if (maxBytes !== undefined && declared > maxBytes)
      throw modelBodyTooLarge(body.model, maxBytes);
    const answer = await idempotently(
      c,
      await jsonFingerprint(c),
      async ({ createdId, takeover }) => {
        // a retry whose first try's replica died after queueing it finds that job
        const found =
          takeover && createdId ? await jobs.find(createdId, c.get("tenant")) : undefined;
        const record = found ?? (await jobs.submit(body, { ...callOptions(c, body), createdId }));
        const self = `/v1/jobs/${record.id}`;
        c.header("Location", self);
        return c.json(
          { id: record.id, status: "queued" as const, urls: { self, events: `${self}/events` } },
          202,
        );
      },
    );
    return answer;
  });
  app.openapi(getRoute, async (c) =>
    c.json(await c.get("services").jobs.get(c.req.valid("param").id, c.get("tenant")), 200),
  );
  app.openapi(cancelRoute, async (c) =>
    c.json(await c.get("services").jobs.cancel(c.req.valid("param").id, c.get("tenant")), 200),
  );
}
