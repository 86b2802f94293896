import type { MiddlewareHandler } from "hono";
import type { HonoEnv } from "../services.js";

/** Counts and times every request by its route pattern (see `ApiMetrics.recordHttp`). */
export function httpMetrics(): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const route = c.req.routePath === "/*" ? "unmatched" : c.req.routePath;
    c.get("services").metrics.recordHttp(
      route,
      c.req.method,
      c.res.status,
      (performance.now() - started) / 1000,
    );
  };
}
