import type { MiddlewareHandler } from "hono";

/** bull-board's page: its own scripts and styles, some inline; nothing from another host. */
const BOARD_POLICY =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'";

/**
 * Headers every answer carries: `nosniff`, so that no JSON or text answer is ever run as a
 * script or page; and on pages, no framing by another site (clickjacking the dashboard's
 * traffic controls), with a content policy where the page has none of its own (bull-board's).
 */
export function securityHeaders(): MiddlewareHandler {
  return async (c, next) => {
    // set ahead too: an event stream writes its head itself, from the context's headers (sse.ts)
    c.header("X-Content-Type-Options", "nosniff");
    await next();
    const headers = c.res.headers;
    headers.set("X-Content-Type-Options", "nosniff");
    if (!(headers.get("Content-Type") ?? "").startsWith("text/html")) return;
    headers.set("X-Frame-Options", "DENY");
    const policy = headers.get("Content-Security-Policy");
    headers.set(
      "Content-Security-Policy",
      policy ? `${policy}; frame-ancestors 'none'` : BOARD_POLICY,
    );
  };
}
