import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context, Next } from "hono";
import { invalidInput } from "../http/errors.js";
import { fingerprintOf, idempotently } from "../http/idempotency.js";
import { isJson } from "../http/media-type.js";
import { json, openAiErrors } from "../http/openapi.js";
import type { HonoEnv } from "../services.js";
import { batchStatusSchema } from "./batch-status-schema.js";
import { MAX_CREATE_BYTES } from "./json-batch-body.js";
import { openAiBatchRequestSchema, openAiBatchSchema } from "./openai-batch-object.js";

const listRoute = createRoute({
  method: "get",
  path: "/v1/batches",
  summary: "The caller's OpenAI-shaped batches, newest first (`after` a batch id, `limit` 1-100)",
  request: {
    query: z.object({
      after: z.string().optional(),
      limit: z.coerce.number().int().min(1).max(100).default(20),
    }),
  },
  responses: {
    200: json(
      z.object({
        object: z.literal("list"),
        data: z.array(openAiBatchSchema),
        first_id: z.string().nullable(),
        last_id: z.string().nullable(),
        has_more: z.boolean(),
      }),
      "A page of batches",
    ),
    400: openAiErrors[400],
  },
});

const cancelRoute = createRoute({
  method: "post",
  path: "/v1/batches/{id}/cancel",
  summary:
    "Cancels a batch. An OpenAI-shaped one (batch_...) is `cancelling` until its queued lines are dropped and its running ones stopped, then `cancelled` with what was answered in its files; one of Ferry's own is `cancelled` at once, its queued rows dropped and those answered kept in its results",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: json(z.union([openAiBatchSchema, batchStatusSchema]), "The batch"),
    400: openAiErrors[400],
    404: openAiErrors[404],
  },
});

/** An OpenAI batch's id, as told from Ferry's own batches' UUIDs. */
const isOpenAiBatchId = (id: string) => id.startsWith("batch_");

/**
 * `POST /v1/batches` in OpenAI's shape, `{input_file_id, endpoint, completion_window,
 * metadata}`: a JSON body with `input_file_id` is OpenAI's, anything else Ferry's own
 * (`{model, items}` or NDJSON), which its route answers.
 */
async function createOpenAiBatch(c: Context<HonoEnv>, next: Next) {
  if (!isJson(c.req.header("Content-Type"))) return next();
  // OpenAI's body is a few fields: one larger than any can be is Ferry's {model, items},
  // which its route reads on the parse thread rather than here on the loop
  if ((await c.req.arrayBuffer()).byteLength > MAX_CREATE_BYTES) return next();
  const raw: unknown = await c.req.json().catch(() => undefined);
  if (raw === null || typeof raw !== "object" || !("input_file_id" in raw)) return next();
  const body = openAiBatchRequestSchema.safeParse(raw);
  if (!body.success) throw invalidInput(body.error.issues);
  const { openAiBatches } = c.get("services");
  return idempotently(c, fingerprintOf(c, raw), async ({ createdId }) =>
    c.json(await openAiBatches.create(body.data, c.get("tenant"), createdId), 200),
  );
}

/** Registered before Ferry's batch routes, which answer the bodies and ids that are theirs. */
export function registerOpenAiBatches(app: OpenAPIHono<HonoEnv>): void {
  app.post("/v1/batches", createOpenAiBatch);
  app.get("/v1/batches/:id", async (c, next) => {
    const id = c.req.param("id");
    if (!isOpenAiBatchId(id)) return next();
    return c.json(await c.get("services").openAiBatches.get(id, c.get("tenant")), 200);
  });
  app.openapi(listRoute, async (c) =>
    c.json(await c.get("services").openAiBatches.list(c.get("tenant"), c.req.valid("query")), 200),
  );
  app.openapi(cancelRoute, async (c) => {
    const { id } = c.req.valid("param");
    const services = c.get("services");
    return c.json(
      isOpenAiBatchId(id)
        ? await services.openAiBatches.cancel(id, c.get("tenant"))
        : await services.batchJobs.cancel(id, c.get("tenant")),
      200,
    );
  });
}
