import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../services.js";

/** Counts and times every request by its route pattern (not its path, which has ids in it). */
export function httpMetrics(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const { metrics } = c.get("services");
    const route = c.req.routePath === "/*" ? "unmatched" : c.req.routePath;
    const labels = { route, method: c.req.method };
    metrics.httpRequests.inc({ ...labels, status: String(c.res.status) });
    metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
  };
}
