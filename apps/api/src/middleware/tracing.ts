import { carrierOf } from "@ferry/telemetry";
import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { PROBE_PATHS } from "../http/probe-paths.js";
import { endServerSpan, startServerSpan } from "../http/server-span.js";
import type { HonoEnv } from "../services.js";

/**
 * A server span per request; its context goes to the services in `CallOptions.trace`. An event stream (written
 * to the connection itself) ends its span when the connection closes, so the span lasts as
 * long as the stream did.
 */
export function tracing(): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const method = c.req.method;
    // probes and scrapes are not requests anyone traces: every few seconds a trace each, on
    // every replica, would bury the requests in Jaeger
    if (method === "GET" && PROBE_PATHS.has(c.req.path)) return next();
    const { span, ctx } = startServerSpan(method, c.req.path, (name) => c.req.header(name));
    const carrier = carrierOf(ctx);
    if (carrier) c.set("trace", carrier);
    try {
      await next();
    } finally {
      const route = c.req.routePath === "/*" ? "unmatched" : c.req.routePath;
      const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
      if (outgoing?.headersSent && !outgoing.writableEnded)
        outgoing.once("close", () => endServerSpan(span, method, route, outgoing.statusCode));
      else endServerSpan(span, method, route, c.res.status);
    }
  };
}
