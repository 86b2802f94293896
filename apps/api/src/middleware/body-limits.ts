import { FerryError } from "@ferry/protocol";
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { errorResponse } from "../http/errors.js";
import { isNdjson } from "../http/media-type.js";
import { lingering } from "../http/upload.js";
import type { HonoEnv, Services } from "../services.js";

/**
 * Routes whose bodies are small by nature, and their limits: the dashboard's sign-in form is
 * a token (an 8 MiB form, open to anyone, had held the API's loop 3 s being parsed).
 */
const SMALL_BODIES: Readonly<Record<string, number>> = {
  "/dashboard/session": 16 * 1024,
  "/dashboard/logout": 16 * 1024,
};

/** The sync routes of a model with inputs of a fixed size: their bodies are held to them. */
const MODEL_ROUTE = /^\/v[12]\/models\/([^/]+)\/(?:predict|infer|versions\/[^/]+\/infer)$/;

/**
 * A body read as it streams, parsed off the API's loop, with limits of its own: an NDJSON
 * batch, a file upload.
 */
export function streamedBody(c: Context): boolean {
  if (c.req.path === "/v1/batches" && isNdjson(c.req.header("Content-Type"))) return true;
  return c.req.path === "/v1/files" && c.req.method === "POST";
}

/** A body past what a model's inputs could need (`tensorBodyBytes`). */
export function modelBodyTooLarge(model: string, maxBytes: number): FerryError {
  return new FerryError(
    "PAYLOAD_TOO_LARGE",
    `Request body exceeds ${maxBytes} bytes, the most model '${model}' takes (what its inputs could need)`,
  );
}

/**
 * A request body's limit, and whose it is (a model's name, for a refusal to say):
 * MAX_BODY_BYTES, less where the route takes less (a form, a model's inputs).
 */
export function bodyLimitOf(services: Services, c: Context): { maxBytes: number; model?: string } {
  const small = SMALL_BODIES[c.req.path];
  const model = small === undefined ? MODEL_ROUTE.exec(c.req.path)?.[1] : undefined;
  const budget = model === undefined ? undefined : services.inference.maxBodyBytes(model);
  if (model !== undefined && budget !== undefined && budget < services.env.MAX_BODY_BYTES)
    return { maxBytes: budget, model };
  return { maxBytes: small ?? services.env.MAX_BODY_BYTES };
}

/**
 * Every request body's limit (`bodyLimitOf`), checked before any of it is read; an NDJSON batch and an upload are read in
 * bounded memory and have limits of their own. A declared length is checked without touching
 * the body stream (touching it takes @hono/node-server off its direct read of the body, and
 * builds a web stream per request); a chunked body is counted as it arrives. A refusal is
 * answered at once, the connection closed once the rest of the body is read out (up to 64 MiB
 * or 5 s): a client still sending reads the 413, not a broken pipe, and one that reads only
 * once it has sent all (Python's http.client) gets that far. Hono's `bodyLimit` counts a
 * chunked body as this does but stops reading it at the limit, and its web stream then holds
 * the node stream beneath paused: such a client's send blocked until the cut, a reset.
 */
export function bodyLimits(
  services: Services,
  /** Asked before a chunked body is read: throws to refuse it unread (`chunkedRefusal`). */
  beforeChunked?: (c: Context) => void,
): MiddlewareHandler<HonoEnv> {
  const refuse = async (
    c: Context,
    error: FerryError,
    reader?: ReadableStreamDefaultReader<Uint8Array>,
  ): Promise<Response> => {
    const refusal = errorResponse(c, error);
    const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
    const body = reader ?? incoming;
    return body ? lingering(refusal, body) : refusal;
  };
  // made only for a refusal: an error's stack is not free, and most bodies pass
  const tooLarge = ({ maxBytes, model }: { maxBytes: number; model?: string }) =>
    model === undefined
      ? new FerryError("PAYLOAD_TOO_LARGE", `Request body exceeds ${maxBytes} bytes`)
      : modelBodyTooLarge(model, maxBytes);
  return (c, next) => {
    if (streamedBody(c)) return next();
    const declared = c.req.header("Content-Length");
    const chunked = c.req.header("Transfer-Encoding") !== undefined;
    // (with neither, there is no body at all: a GET, say)
    if (!chunked && declared === undefined) return next();
    const limit = bodyLimitOf(services, c);
    if (!chunked) return Number(declared) > limit.maxBytes ? refuse(c, tooLarge(limit)) : next();
    if (beforeChunked)
      try {
        beforeChunked(c);
      } catch (err) {
        if (err instanceof FerryError) return refuse(c, err);
        throw err;
      }
    return countedAsItArrives(c, next, limit.maxBytes, (reader) =>
      refuse(c, tooLarge(limit), reader),
    );
  };
}

/**
 * Reads a body of no declared length up to `maxBytes`, then hands it on whole; past them,
 * `refuse` answers with the reader still held, to read the rest out.
 */
async function countedAsItArrives(
  c: Context,
  next: () => Promise<void>,
  maxBytes: number,
  refuse: (reader: ReadableStreamDefaultReader<Uint8Array>) => Promise<Response>,
): Promise<Response | undefined> {
  const body = c.req.raw.body;
  if (!body) {
    await next();
    return undefined;
  }
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) return refuse(reader);
    chunks.push(value);
  }
  c.req.raw = new Request(c.req.raw, { body: Buffer.concat(chunks, size) });
  // its size, for what counts bodies after authentication (`keyBodyRate`)
  c.set("bodyBytes", size);
  await next();
  return undefined;
}
