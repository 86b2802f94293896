import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { ServerTiming } from "../http/server-timing.js";
import type { HonoEnv } from "../services.js";

/**
 * Gives each request what its call fills about its work (`CallOptions.timing` and `.jobs`),
 * and sends it on a synchronous answer: `Server-Timing` when something was measured, and
 * `X-Job-Id` naming the jobs of an answer that succeeded. An event stream's headers are gone
 * before its work is done (it names its jobs itself).
 */
export function answerHeaders(): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const timing = new ServerTiming();
    const jobs: string[] = [];
    c.set("serverTiming", timing);
    c.set("namedJobs", jobs);
    await next();
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    if (outgoing?.headersSent) return;
    if (timing.measured) c.res.headers.set("Server-Timing", timing.header());
    if (jobs.length > 0 && c.res.ok && !c.res.headers.has("X-Job-Id"))
      c.res.headers.set("X-Job-Id", jobs.join(", "));
  };
}
