import type { MiddlewareHandler } from "hono";

/**
 * Reads a KServe v2 (or Ferry predict) body sent with no media type, or with curl's default
 * form type, as the JSON it is: Triton reads the body whatever its Content-Type, and its documentation's
 * examples (`curl -X POST .../infer -d '{...}'`) send none. Triton's binary form
 * (Inference-Header-Content-Length) is left to its own reader; any other declared type is
 * left to the route, which refuses it.
 */
export const jsonByDefault: MiddlewareHandler = async (c, next) => {
  const type = c.req.header("Content-Type");
  if (
    c.req.method === "POST" &&
    c.req.header("Inference-Header-Content-Length") === undefined &&
    (type === undefined ||
      type.split(";")[0]?.trim().toLowerCase() === "application/x-www-form-urlencoded")
  )
    c.req.raw.headers.set("Content-Type", "application/json");
  await next();
};
