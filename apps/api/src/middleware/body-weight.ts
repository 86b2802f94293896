import type { MiddlewareHandler } from "hono";
import { IDEMPOTENCY_HEADER } from "../http/idempotency.js";
import { jsonWeight, tooHeavy } from "../http/json-weight.js";
import { isJson } from "../http/media-type.js";
import type { HonoEnv, Services } from "../services.js";
import { bodyLimitOf, streamedBody } from "./body-limits.js";
import { addressOf, BodyRateLimiter } from "./key-body-rate.js";

/**
 * Each JSON body the loop will parse, weighed first (`jsonWeight`: its bytes, and what the
 * objects, lists, strings, properties and elements JSON.parse makes of it cost): one that
 * would cost more than its route's largest body of numbers is refused (413), and the rest are
 * counted against their sender's KEY_BODY_BYTES_PER_S at their weight rather than their
 * length (twice with an Idempotency-Key). The body is then parsed once for the request, its
 * schema and fingerprint alike. The JSON head of Triton's binary form (v2 infer) is weighed as
 * one. Not weighed: streamed bodies (NDJSON batches, uploads) and a `{model, items}` batch past
 * any OpenAI create, parsed on the parse thread with a density rule of their own. After
 * admission and turns, so that a request refused for its queue is not read first.
 */
export function bodyWeight(
  services: Services,
  rate: BodyRateLimiter | undefined,
  /** Whether a body of `bytes` on `path` is parsed off the loop, by rules of its own. */
  offLoop: (path: string, bytes: number) => boolean,
): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    if (c.req.method !== "POST" || streamedBody(c)) return next();
    const headLength = c.req.header("Inference-Header-Content-Length");
    // Triton's binary form is the v2 infer routes' alone: elsewhere the header says nothing
    const binary = headLength !== undefined && V2_INFER.test(c.req.path);
    if (!binary && !isJson(c.req.header("Content-Type"))) return next();
    const declared = c.req.header("Content-Length");
    const bytes = declared === undefined ? c.get("bodyBytes") : Number(declared);
    if (bytes === undefined || offLoop(c.req.path, bytes)) return next();
    const { maxBytes } = bodyLimitOf(services, c);
    let weight: number | undefined;
    if (c.req.path === "/v1/batches") {
      // its routes read the bytes (a batch's keys must be UTF-8): read as text first, they
      // would be the text's re-encoding, a bad byte a U+FFFD (review)
      weight = jsonWeight(new Uint8Array(await c.req.arrayBuffer()), maxBytes);
    } else if (!binary) {
      // read as the route reads it (Hono keeps the text): an ArrayBuffer first had cost a
      // 7 MB prompt two more copies, ~45 ms of the loop. Weighed in bytes, as `take` counted
      // it: a character past ASCII is two to four
      const text = await c.req.text();
      const extra = bytes - text.length;
      const chars = jsonWeight(text, maxBytes - extra);
      weight = chars === undefined ? undefined : chars + extra;
      // one parse a request: the route's schema and an Idempotency-Key's fingerprint (which
      // reads the body as sent, fields no schema knows included) had each parsed it
      const parse = c.req.json.bind(c.req);
      let parsed: Promise<unknown> | undefined;
      c.req.json = (() => (parsed ??= parse())) as typeof c.req.json;
    } else {
      // its JSON head is weighed, its tensors by their bytes here and by the elements they
      // decode to once the route has read the head (`weighMore`); a head length that does not
      // fit is the route's 400
      const body = new Uint8Array(await c.req.arrayBuffer());
      const length = headLength as string;
      if (!/^[0-9]{1,15}$/.test(length) || Number(length) > body.byteLength) return next();
      const head = jsonWeight(body.subarray(0, Number(length)), maxBytes);
      weight = head === undefined ? undefined : head + body.byteLength - Number(length);
    }
    if (weight === undefined) throw tooHeavy(maxBytes);
    const sender = BodyRateLimiter.sender(c.get("tenant"), addressOf(c));
    // a keyed request's fingerprint walks the body once more, sorting every object's keys
    const keyed = c.req.header(IDEMPOTENCY_HEADER) !== undefined;
    rate?.takeWeight(sender, bytes, keyed ? 2 * weight : weight);
    if (binary) {
      // its tensors' elements once its head is read (a BOOL tensor's byte is an array element)
      const weighed = weight;
      c.set("weighMore", (extra) => {
        if (weighed + extra > maxBytes) throw tooHeavy(maxBytes);
        rate?.takeWeight(sender, weighed, weighed + extra);
      });
    }
    await next();
  };
}

const V2_INFER = /^\/v2\/models\/[^/]+\/(?:versions\/[^/]+\/)?infer$/;
