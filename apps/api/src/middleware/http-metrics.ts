import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../services.js";

interface Bound {
  count: { inc(): void };
  time: { observe(seconds: number): void };
}

/**
 * Counts and times every request by its route pattern (not its path, which has ids in it).
 * The metrics' children are bound once per route, method and status: prom-client validates
 * and hashes a label set on every call otherwise, a noticeable share of a cheap request.
 */
export function httpMetrics(): MiddlewareHandler<AppEnv> {
  const bound = new Map<string, Bound>();
  return async (c, next) => {
    const started = performance.now();
    await next();
    const route = c.req.routePath === "/*" ? "unmatched" : c.req.routePath;
    const method = c.req.method;
    const status = String(c.res.status);
    const key = `${route} ${method} ${status}`;
    let metrics = bound.get(key);
    if (!metrics) {
      const { httpRequests, httpDuration } = c.get("services").metrics;
      metrics = {
        count: httpRequests.labels({ route, method, status }),
        time: httpDuration.labels({ route, method }),
      };
      bound.set(key, metrics);
    }
    metrics.count.inc();
    metrics.time.observe((performance.now() - started) / 1000);
  };
}
