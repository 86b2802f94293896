import type { IncomingMessage, ServerResponse } from "node:http";
import { FerryError } from "@ferry/protocol";
import { carrierOf, type TraceCarrier } from "@ferry/telemetry";
import type { Guards } from "../guards.js";
import {
  callOptionsFrom,
  type HeaderReader,
  noCache,
  timeoutHeader,
} from "../http/call-options.js";
import {
  AUTH_CHALLENGE,
  errorBody,
  httpStatus,
  invalidInput,
  toFerryError,
} from "../http/errors.js";
import { jsonWeight, tooHeavy } from "../http/json-weight.js";
import { isJson } from "../http/media-type.js";
import { requestIdFrom } from "../http/request-id.js";
import { endServerSpan, startServerSpan } from "../http/server-span.js";
import { ServerTiming } from "../http/server-timing.js";
import { modelBodyTooLarge } from "../middleware/body-limits.js";
import type { InFlight } from "../middleware/in-flight.js";
import { BodyRateLimiter } from "../middleware/key-body-rate.js";
import type { Services } from "../services.js";
import { predictBodySchema } from "./schemas.js";

/** The route's pattern, as Hono names it in the HTTP metrics. */
const ROUTE = "/v1/models/:name/predict";
/** A model name as model.json allows it; anything else (escapes, a query) goes to Hono. */
const PATH = /^\/v1\/models\/([a-z0-9][a-z0-9._-]*)\/predict$/;

/**
 * POST /v1/models/{name}/predict without Hono, for its common form (a JSON body of declared
 * length within the limit): the hot route's whole cost is a few hundred microseconds, and
 * Hono's request and response objects and its middleware chain were ~12% of the API's CPU
 * per request at 64 clients (measured side by side: docs/benchmarks.md). The same
 * rules run, in the same order, from the same functions as in Hono's chain (request id,
 * in-flight count, API key, tenant limits, admission before the body, JSON, schema, HTTP
 * metrics, errors); every other form of the request goes to Hono's route, which stays the
 * documented one (OpenAPI) and the reference (test/predict-fast-path.test.ts compares them).
 * Returns false for a request it does not take.
 */
export function predictFastPath(
  services: Services,
  inFlight: InFlight,
  guards: Guards,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const name = takes(req, services.env.MAX_BODY_BYTES);
    if (name === undefined) return false;
    inFlight.enter();
    const served = services.tracing
      ? traced(req, name, (trace) => serve(services, guards, name, req, res, trace))
      : serve(services, guards, name, req, res);
    void served.finally(() => inFlight.leave());
    return true;
  };
}

/** The model a request names when the fast path takes it; undefined leaves it to Hono. */
export function takes(
  req: Pick<IncomingMessage, "method" | "url" | "headers">,
  maxBodyBytes: number,
): string | undefined {
  if (req.method !== "POST") return undefined;
  const name = PATH.exec(req.url ?? "")?.[1];
  if (name === undefined) return undefined;
  const type = req.headers["content-type"];
  if (!isJson(type)) return undefined;
  // a chunked body is counted as it arrives, and one over the limit closes the connection:
  // Hono's route does both
  if (req.headers["transfer-encoding"] !== undefined) return undefined;
  const length = Number(req.headers["content-length"]);
  return length > 0 && length <= maxBodyBytes ? name : undefined;
}

/** `serve` under the request's server span, as Hono's `tracing` middleware does. */
async function traced(
  req: IncomingMessage,
  name: string,
  run: (trace: TraceCarrier | undefined) => Promise<number>,
) {
  const { span, ctx } = startServerSpan("POST", `/v1/models/${name}/predict`, (key) => {
    const value = req.headers[key];
    return Array.isArray(value) ? value[0] : value;
  });
  let status = 500;
  try {
    status = await run(carrierOf(ctx));
  } finally {
    endServerSpan(span, "POST", ROUTE, status);
  }
}

/** Answers the request; resolves with the status it answered. */
async function serve(
  services: Services,
  guards: Guards,
  name: string,
  req: IncomingMessage,
  res: ServerResponse,
  trace?: TraceCarrier,
): Promise<number> {
  const started = performance.now();
  const header: HeaderReader = (key) => {
    const value = req.headers[key.toLowerCase()];
    return Array.isArray(value) ? value.join(", ") : value;
  };
  const requestId = requestIdFrom(header("X-Request-Id"));
  const timing = new ServerTiming();
  const path = `/v1/models/${name}/predict`;
  let status = 200;
  let leave: (() => void) | undefined;
  let release: (() => void) | undefined;
  try {
    // first, as Hono's chain holds a body to its model's budget (`bodyLimits`); a chunked body
    // goes to Hono's route, which counts it as it comes
    const maxBytes = services.inference.maxBodyBytes(name);
    if (maxBytes !== undefined && Number(req.headers["content-length"]) > maxBytes)
      throw modelBodyTooLarge(name, maxBytes);
    const tenant = guards.authenticate(header("Authorization"), path);
    leave = guards.limit?.(tenant, path);
    const sender = BodyRateLimiter.sender(tenant, req.socket.remoteAddress);
    guards.bodyRate?.take(sender, Number(req.headers["content-length"]) || 0);
    // before the body is read, as `admitBeforeBody` does
    const admitted = await services.inference.admit(name, undefined, {
      timeoutMs: timeoutHeader(header),
      cache: noCache(header),
    });
    release = admitted.release;
    const raw = await readBody(req);
    // an admitted request holds its place; its parsing waits when this turn has done enough
    const turn = guards.turns.take();
    if (turn) await turn;
    // weighed as Hono's chain weighs a body (`bodyWeight`)
    const most = Math.min(maxBytes ?? Number.POSITIVE_INFINITY, services.env.MAX_BODY_BYTES);
    const weight = jsonWeight(raw, most);
    if (weight === undefined) throw tooHeavy(most);
    guards.bodyRate?.takeWeight(sender, raw.byteLength, weight);
    const checked = predictBodySchema.safeParse(parseJson(raw));
    if (!checked.success) throw invalidInput(checked.error.issues);
    const body = checked.data;
    const result = await services.inference.predict(
      name,
      admitted.version,
      body,
      callOptionsFrom(header, body, {
        requestId,
        tenant,
        releaseAdmission: release,
        waitedMs: turn ? performance.now() - started : undefined,
        timing,
        trace,
      }),
    );
    send(res, 200, result, requestId, undefined, timing);
  } catch (err) {
    const error = toFerryError(err);
    if (error.code === "INTERNAL") services.log.error({ err, requestId }, "unhandled error");
    status = httpStatus(error.code);
    send(res, status, errorBody(path, error), requestId, error.retryAfterS);
    // what is left of the body is read and dropped: the connection carries the next request
    req.resume();
  } finally {
    release?.();
    leave?.();
    services.metrics.recordHttp(ROUTE, "POST", status, (performance.now() - started) / 1000);
  }
  return status;
}

/**
 * The body, by listeners rather than `node:stream/consumers` (an async iterator and a promise
 * per chunk): a predict body is one or two chunks, read on every request.
 */
function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () =>
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)),
    );
    req.once("error", reject);
    req.once("aborted", () => reject(new FerryError("INVALID_INPUT", "request aborted")));
  });
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new FerryError("INVALID_INPUT", "Malformed JSON in request body");
  }
}

function send(
  res: ServerResponse,
  status: number,
  value: unknown,
  requestId: string,
  retryAfterS?: number,
  timing?: ServerTiming,
): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(value);
  const headers: Record<string, string | number> = {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    "X-Request-Id": requestId,
    // as every answer of Hono's chain (securityHeaders)
    "X-Content-Type-Options": "nosniff",
  };
  if (retryAfterS !== undefined) headers["Retry-After"] = String(retryAfterS);
  if (status === 401) headers["WWW-Authenticate"] = AUTH_CHALLENGE;
  if (timing?.measured) headers["Server-Timing"] = timing.header();
  res.writeHead(status, headers);
  res.end(text);
}
