import { FerryError } from "@ferry/protocol";
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { stream } from "hono/streaming";
import { idempotently, parsedFingerprint } from "../http/idempotency.js";
import { boundaryOf, type MultipartEvent, multipartEvents } from "../http/multipart.js";
import { idempotencyErrors, idempotencyHeaders, json, openAiErrors } from "../http/openapi.js";
import { openAiErrorSchema } from "../http/schemas.js";
import { bodyChunks, refusalOf } from "../http/upload.js";
import type { HonoEnv } from "../services.js";

const fileSchema = z
  .object({
    id: z.string(),
    object: z.literal("file"),
    bytes: z.number(),
    created_at: z.number(),
    expires_at: z.number(),
    filename: z.string(),
    purpose: z.string(),
    status: z.literal("processed"),
    status_details: z.null(),
  })
  .openapi("File");
const idParam = z.object({ id: z.string() });

const uploadRoute = createRoute({
  method: "post",
  path: "/v1/files",
  summary:
    'Uploads a batch input file (OpenAI\'s Files API): multipart/form-data with `file` (JSONL, one {custom_id, method, url, body} a line, custom_ids unique) and `purpose` ("batch"); checked and stored as it streams, within MAX_FILE_BYTES and MAX_FILE_LINES',
  request: {
    headers: idempotencyHeaders,
    body: {
      content: {
        "multipart/form-data": {
          schema: z.object({
            file: z.string().openapi({ format: "binary" }),
            purpose: z.literal("batch"),
          }),
        },
      },
      required: true,
    },
  },
  responses: {
    200: json(fileSchema, "The stored file"),
    ...openAiErrors,
    403: json(
      openAiErrorSchema,
      "The key's file storage is full (FILE_STORAGE_PER_KEY_BYTES, FILES_PER_KEY): quota_exceeded",
    ),
    413: openAiErrors[400],
    ...idempotencyErrors,
  },
});

const listRoute = createRoute({
  method: "get",
  path: "/v1/files",
  summary: "The caller's files (uploads and batch outputs), newest first unless `order=asc`",
  request: {
    query: z.object({
      after: z.string().optional(),
      limit: z.coerce.number().int().min(1).max(10_000).default(10_000),
      order: z.enum(["asc", "desc"]).default("desc"),
      purpose: z.string().optional(),
    }),
  },
  responses: {
    200: json(
      z.object({
        object: z.literal("list"),
        data: z.array(fileSchema),
        first_id: z.string().nullable(),
        last_id: z.string().nullable(),
        has_more: z.boolean(),
      }),
      "A page of files",
    ),
    400: openAiErrors[400],
  },
});

const getRoute = createRoute({
  method: "get",
  path: "/v1/files/{id}",
  summary: "A file's description",
  request: { params: idParam },
  responses: { 200: json(fileSchema, "The file"), 404: openAiErrors[404] },
});

const deleteRoute = createRoute({
  method: "delete",
  path: "/v1/files/{id}",
  summary: "Deletes a file",
  request: { params: idParam },
  responses: {
    200: json(
      z.object({ id: z.string(), object: z.literal("file"), deleted: z.literal(true) }),
      "Deleted",
    ),
    404: openAiErrors[404],
  },
});

const contentRoute = createRoute({
  method: "get",
  path: "/v1/files/{id}/content",
  summary: "A file's bytes, as uploaded or as its batch wrote them (JSONL)",
  request: { params: idParam },
  responses: {
    200: { content: { "application/jsonl": { schema: z.string() } }, description: "The file" },
    404: openAiErrors[404],
  },
});

/** Bytes of a multipart body past its file's: the other fields and the parts' headers. */
const FORM_OVERHEAD_BYTES = 1024 * 1024;

/** What of a multipart body a retry's fingerprint compares: its fields and their data. */
function digestOf(event: MultipartEvent): string | Uint8Array {
  if (event.type === "data") return event.data;
  if (event.type === "part") return `\npart ${event.name} ${event.filename ?? ""}\n`;
  return "\nend\n";
}

/** A body's chunks, refused (413) the moment they pass `maxBytes`. */
async function* upTo(chunks: AsyncIterable<Uint8Array>, maxBytes: number) {
  let bytes = 0;
  for await (const chunk of chunks) {
    bytes += chunk.byteLength;
    if (bytes > maxBytes)
      throw new FerryError("PAYLOAD_TOO_LARGE", `the upload exceeds ${maxBytes} bytes`);
    yield chunk;
  }
}

/** The body's length when its request says it (the most its file can take), else undefined. */
function declaredLength(c: Context): number | undefined {
  const length = Number(c.req.header("Content-Length"));
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

export function registerFiles(app: OpenAPIHono<HonoEnv>): void {
  // documented, not validated: a validator would read the whole form before the route
  app.openAPIRegistry.registerPath(uploadRoute);
  app.post("/v1/files", async (c) => {
    const { files, env } = c.get("services");
    const incoming = c.env.incoming;
    try {
      const boundary = boundaryOf(c.req.header("Content-Type"));
      const body = upTo(bodyChunks(incoming), env.MAX_FILE_BYTES + FORM_OVERHEAD_BYTES);
      const { items, streamed } = parsedFingerprint(c, multipartEvents(body, boundary), digestOf);
      return await idempotently(c, streamed, async ({ createdId, takeover }) =>
        c.json(
          await files.upload(
            items,
            c.get("tenant"),
            createdId,
            takeover,
            declaredLength(c),
            createdId === undefined ? undefined : streamed.afterRun,
          ),
          200,
        ),
      );
    } catch (err) {
      return refusalOf(c, err, incoming);
    }
  });

  app.openapi(listRoute, async (c) => {
    const { purpose, ...page } = c.req.valid("query");
    return c.json(await c.get("services").files.list(c.get("tenant"), page, purpose), 200);
  });

  app.openapi(getRoute, async (c) => {
    const { files } = c.get("services");
    return c.json(await files.get(c.req.valid("param").id, c.get("tenant")), 200);
  });

  app.openapi(deleteRoute, async (c) =>
    c.json(await c.get("services").files.delete(c.req.valid("param").id, c.get("tenant")), 200),
  );

  app.openapi(contentRoute, async (c) => {
    const chunks = await c.get("services").files.content(c.req.valid("param").id, c.get("tenant"));
    c.header("Content-Type", "application/jsonl");
    const body = stream(c, async (out) => {
      for await (const chunk of chunks) await out.write(chunk);
    });
    // a streamed body has no typed-response form in zod-openapi; the route documents it
    return body as unknown as never;
  });
}
