import type { MiddlewareHandler } from "hono";
import { jsonWeight, tooHeavy } from "../http/json-weight.js";
import { isJson } from "../http/media-type.js";
import type { HonoEnv, Services } from "../services.js";
import { bodyLimitOf, streamedBody } from "./body-limits.js";
import { addressOf, BodyRateLimiter } from "./key-body-rate.js";

/**
 * Each JSON body the loop will parse, weighed first (`jsonWeight`: its bytes, and what its
 * objects and lists cost): one that would cost more than its route's largest body of plain
 * JSON is refused (413), and the rest are counted against their sender's
 * KEY_BODY_BYTES_PER_S at their weight rather than their length. The JSON head of Triton's
 * binary form is weighed as one. Not weighed: streamed bodies (NDJSON batches, uploads) and a
 * `{model, items}` batch past any OpenAI create, parsed on the parse thread with a density
 * rule of their own. After admission and turns, so that a request refused for its queue is
 * not read first; the route's own read of the body then takes it from Hono's cache.
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
    if (headLength === undefined && !isJson(c.req.header("Content-Type"))) return next();
    const declared = c.req.header("Content-Length");
    const bytes = declared === undefined ? c.get("bodyBytes") : Number(declared);
    if (bytes === undefined || offLoop(c.req.path, bytes)) return next();
    const { maxBytes } = bodyLimitOf(services, c);
    let weight: number | undefined;
    if (headLength === undefined) {
      // read as the route reads it (Hono keeps the text): an ArrayBuffer first had cost a
      // 7 MB prompt two more copies, ~45 ms of the loop
      weight = jsonWeight(await c.req.text(), maxBytes);
    } else {
      // Triton's binary form: its JSON head is weighed, its tensors counted by their bytes; a
      // head length that does not fit is the route's 400
      const body = new Uint8Array(await c.req.arrayBuffer());
      if (!/^[0-9]{1,15}$/.test(headLength) || Number(headLength) > body.byteLength) return next();
      const head = jsonWeight(body.subarray(0, Number(headLength)), maxBytes);
      weight = head === undefined ? undefined : head + body.byteLength - Number(headLength);
    }
    if (weight === undefined) throw tooHeavy(maxBytes);
    rate?.takeWeight(BodyRateLimiter.sender(c.get("tenant"), addressOf(c)), bytes, weight);
    await next();
  };
}
