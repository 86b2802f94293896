import type { MiddlewareHandler } from "hono";
import { timeoutHeader } from "../call-options.js";
import type { AppEnv } from "../services.js";

/**
 * Sync classifier routes name their model in the path, so a request its queue cannot serve
 * in time is refused before its body is read, parsed or validated, and with no Redis round
 * trip: under overload, refusing must cost far less than serving. The route then serves the
 * version drawn here (`admittedVersion`). A body's own `timeout_ms` is checked again when the
 * row is queued.
 */
export function admitBeforeBody(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const name = c.req.param("name");
    if (name !== undefined) {
      const version = await c
        .get("services")
        .inference.admit(name, c.req.param("version"), timeoutHeader(c));
      c.set("admittedVersion", version);
    }
    await next();
  };
}
