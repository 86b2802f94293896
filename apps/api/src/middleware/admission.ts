import type { MiddlewareHandler } from "hono";
import { noCache, timeoutHeader } from "../http/call-options.js";
import type { TurnShare } from "../http/turn-share.js";
import type { HonoEnv } from "../services.js";

/**
 * Sync classifier routes name their model in the path, so a request its queue cannot serve
 * in time is refused before its body is read, parsed or validated, and with no Redis round
 * trip: under overload, refusing must cost far less than serving. A model with its
 * prediction cache on is the exception: its request is counted here but refused only once
 * its cache lookup missed, since a cached answer needs no queue. The route then serves the
 * version drawn here (`admittedVersion`). The request holds a place in its queue's depth from
 * here until its rows are queued (where they are checked again, with the body's own
 * `timeout_ms`), so a burst that arrives in one turn counts itself before any body is parsed.
 * An admitted request whose turn has done its share of work waits in `turns` before its body
 * is read; the wait counts against its deadline.
 */
export function admitBeforeBody(turns: TurnShare): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const name = c.req.param("name");
    if (name === undefined) return next();
    const arrived = performance.now();
    const header = (key: string) => c.req.header(key);
    const admitted = await c
      .get("services")
      .inference.admit(name, c.req.param("version"), {
        timeoutMs: timeoutHeader(header),
        // the body's own `cache: false` is read later; the header is known now
        cache: noCache(header),
      })
      .catch(async (err: unknown) => {
        // read, not parsed: a body left unread closes the connection (@hono/node-server
        // gives its drain half a second), and a refused client's next request needs it
        await c.req.raw.arrayBuffer().catch(() => undefined);
        throw err;
      });
    const { version, release } = admitted;
    c.set("admittedVersion", version);
    c.set("releaseAdmission", release);
    try {
      const turn = turns.take();
      if (turn) {
        await turn;
        c.set("waitedMs", performance.now() - arrived);
      }
      await next();
    } finally {
      release();
    }
  };
}
