import { FerryError } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { stream } from "hono/streaming";
import { idempotencyKeyReused } from "../http/errors.js";
import {
  fingerprintHead,
  IDEMPOTENCY_HEADER,
  idempotently,
  streamedFingerprint,
} from "../http/idempotency.js";
import { isJson, isNdjson } from "../http/media-type.js";
import { idempotencyErrors, idempotencyHeaders, json, openAiErrors } from "../http/openapi.js";
import { bodyChunks, refusalOf } from "../http/upload.js";
import type { HonoEnv } from "../services.js";
import { ndjsonSegments } from "./batch-job-service.js";
import { batchStatusSchema } from "./batch-status-schema.js";
import { openAiBatchSchema } from "./openai-batch-object.js";

const batchBodySchema = z
  .object({
    model: z.string(),
    version: z.string().optional(),
    items: z.array(z.object({ key: z.string(), features: z.array(z.number()) })).min(1),
  })
  .openapi("BatchRequest");
const idParam = z.object({ id: z.string() });

const createBatchRoute = createRoute({
  method: "post",
  path: "/v1/batches",
  summary:
    "Offline batch prediction: JSON {model, items}, or an NDJSON body of {key, features} lines with ?model=; or OpenAI's Batch API: JSON {input_file_id, endpoint, completion_window, metadata}, answered 200 with the batch",
  request: {
    headers: idempotencyHeaders,
    query: z.object({ model: z.string().optional(), version: z.string().optional() }),
    body: {
      content: {
        // a reference, not the schema: zod-openapi would parse and check a JSON body on the
        // loop before the route reads it on the parse thread
        "application/json": { schema: { $ref: "#/components/schemas/BatchRequest" } },
        "application/x-ndjson": { schema: z.string() },
      },
      required: false,
    },
  },
  responses: {
    200: json(openAiBatchSchema, "An OpenAI-shaped batch, created (its body had input_file_id)"),
    202: json(z.object({ id: z.string(), status: z.string(), total: z.number() }), "Accepted"),
    ...openAiErrors,
    ...idempotencyErrors,
  },
});

const statusRoute = createRoute({
  method: "get",
  path: "/v1/batches/{id}",
  summary:
    "A batch's status and counts; an OpenAI-shaped batch's id (batch_...) reads as OpenAI's batch object",
  request: { params: idParam },
  responses: {
    200: json(z.union([batchStatusSchema, openAiBatchSchema]), "The batch"),
    404: openAiErrors[404],
  },
});

const resultsRoute = createRoute({
  method: "get",
  path: "/v1/batches/{id}/results",
  summary: "A batch's results as NDJSON, one line per key",
  request: { params: idParam },
  responses: {
    200: { content: { "application/x-ndjson": { schema: z.string() } }, description: "NDJSON" },
    404: openAiErrors[404],
  },
});

const predictionRoute = createRoute({
  method: "get",
  path: "/v1/predictions/{model}/{key}",
  summary: "The stored answer for a key, with no inference",
  request: {
    params: z.object({ model: z.string(), key: z.string() }),
    query: z.object({ owner: z.string().optional() }),
  },
  responses: {
    200: json(z.record(z.string(), z.unknown()), "The stored prediction"),
    404: openAiErrors[404],
  },
});

/** Bytes of one NDJSON line (one item): an item of a few thousand features is far below. */
const MAX_LINE_BYTES = 1024 * 1024;

export function registerBatches(app: OpenAPIHono<HonoEnv>): void {
  app.openAPIRegistry.register("BatchRequest", batchBodySchema);
  app.openapi(createBatchRoute, async (c) => {
    const { batchJobs, batchJobReader, env } = c.get("services");
    const tenant = c.get("tenant");
    const type = c.req.header("Content-Type") ?? "";
    // a retry whose first try's replica died after its batch was sealed finds that batch
    const earlier = async (createdId: string | undefined, takeover: boolean) => {
      if (!takeover || !createdId) return undefined;
      const found = await batchJobReader.status(createdId, tenant).catch(() => undefined);
      if (found?.status === "ingesting")
        throw new FerryError(
          "IDEMPOTENCY_KEY_IN_USE",
          `An earlier request with this Idempotency-Key was cut off while batch ${createdId} was ingesting (the items it took run); send the batch again with a new key`,
        );
      return found;
    };
    const accepted = (id: string, total: number) => {
      c.header("Location", `/v1/batches/${id}`);
      return c.json({ id, status: "running", total }, 202);
    };
    if (isNdjson(type)) {
      const { model, version } = c.req.valid("query");
      if (!model)
        throw new FerryError(
          "INVALID_INPUT",
          "an NDJSON batch names its model: POST /v1/batches?model=<name>",
        );
      const limits = {
        maxBodyBytes: env.MAX_BATCH_BODY_BYTES,
        maxLineBytes: Math.min(env.MAX_BODY_BYTES, MAX_LINE_BYTES),
      };
      const incoming = c.env.incoming;
      const { chunks, streamed } = streamedFingerprint(
        c,
        bodyChunks(incoming),
        env.MAX_BATCH_BODY_BYTES,
      );
      try {
        return await idempotently(c, streamed, async ({ createdId, takeover }) => {
          const found = await earlier(createdId, takeover);
          if (found) {
            // the earlier attempt claimed the key before its body was read: the batch it
            // sealed says what that body was, and this one is read whole to compare (and for
            // the answer kept now to hold its fingerprint, not that of a body never read)
            const mine = await streamed.readAll();
            const theirs = await batchJobs.fingerprint(found.id);
            if (theirs !== undefined && theirs !== mine) throw idempotencyKeyReused();
            return accepted(found.id, found.total);
          }
          const segments = ndjsonSegments(chunks, limits);
          const result = await batchJobs.ingestNdjson(
            model,
            version,
            segments,
            tenant.id,
            createdId,
            createdId === undefined ? undefined : streamed.afterRun,
          );
          return accepted(result.id, result.total);
        });
      } catch (err) {
        // a raw Response (the refusal, lingering): no typed-response form in zod-openapi
        return (await refusalOf(c, err, incoming)) as unknown as never;
      }
    }
    if (!isJson(type))
      throw new FerryError(
        "UNSUPPORTED_MEDIA_TYPE",
        "Unsupported Media Type: send a batch as JSON (application/json) or NDJSON (application/x-ndjson)",
      );
    // read on the parse thread, not here: an 8 MB body's JSON and its checks held this loop
    // ~280 ms, and every model's requests with it (a copy moves there: the body stays readable)
    const bytes = new Uint8Array((await c.req.arrayBuffer()).slice(0));
    const keyed = c.req.header(IDEMPOTENCY_HEADER) !== undefined;
    const parsed = await batchJobs.parseJson(bytes, keyed ? fingerprintHead(c) : undefined);
    if (parsed.problem !== undefined) throw new FerryError("INVALID_INPUT", parsed.problem);
    return idempotently(
      c,
      () => parsed.fingerprint as string,
      async ({ createdId, takeover }) => {
        const found = await earlier(createdId, takeover);
        if (found) return accepted(found.id, found.total);
        const result = await batchJobs.ingestParsed(parsed, tenant.id, createdId);
        return accepted(result.id, result.total);
      },
    );
  });

  app.openapi(statusRoute, async (c) => {
    const { batchJobReader } = c.get("services");
    return c.json(await batchJobReader.status(c.req.valid("param").id, c.get("tenant")), 200);
  });

  app.openapi(resultsRoute, async (c) => {
    const { id } = c.req.valid("param");
    const pages = await c.get("services").batchJobReader.results(id, c.get("tenant"));
    c.header("Content-Type", "application/x-ndjson");
    const body = stream(c, async (out) => {
      for await (const page of pages) await out.write(page);
    });
    // a streamed body has no typed-response form in zod-openapi; the route documents it
    return body as unknown as never;
  });

  app.openapi(predictionRoute, async (c) => {
    const { model, key } = c.req.valid("param");
    const { owner } = c.req.valid("query");
    const stored = await c
      .get("services")
      .batchJobReader.prediction(model, key, c.get("tenant"), owner);
    return c.json(stored as unknown as Record<string, unknown>, 200);
  });
}
