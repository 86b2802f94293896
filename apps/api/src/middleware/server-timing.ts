import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { ServerTiming } from "../http/server-timing.js";
import type { HonoEnv } from "../services.js";

/**
 * Gives each request a `ServerTiming` its call fills (`CallOptions.timing`), and sends it as
 * `Server-Timing` on a synchronous answer that measured something; an event stream's headers
 * are gone before its work is done.
 */
export function serverTiming(): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const timing = new ServerTiming();
    c.set("serverTiming", timing);
    await next();
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    if (timing.measured && !outgoing?.headersSent)
      c.res.headers.set("Server-Timing", timing.header());
  };
}
