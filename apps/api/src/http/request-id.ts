import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { HonoEnv } from "../services.js";

/**
 * A request's id: the client's X-Request-Id when it is a plain token (word characters, `-`
 * and `=`, at most 255), else a new UUID (hono/request-id's rule, shared by the predict fast
 * path). Sent back as X-Request-Id and logged with what the request caused.
 */
export function requestIdFrom(header: string | undefined): string {
  return header && header.length <= 255 && !/[^\w\-=]/.test(header) ? header : randomUUID();
}

export function requestId(): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const id = requestIdFrom(c.req.header("X-Request-Id"));
    c.set("requestId", id);
    c.header("X-Request-Id", id);
    await next();
  };
}
