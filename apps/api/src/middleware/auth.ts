import { createHash, timingSafeEqual } from "node:crypto";
import { FerryError } from "@ferry/protocol";
import type { Context, MiddlewareHandler } from "hono";

/** Compares secrets in constant time: both sides are hashed first, so lengths leak nothing. */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

function bearer(c: Context): string | undefined {
  const header = c.req.header("Authorization");
  if (!header?.startsWith("Bearer ")) return undefined;
  return header.slice("Bearer ".length).trim();
}

/**
 * API keys for /v1 and /v2 (health probes excepted), as OpenAI clients send them:
 * `Authorization: Bearer <key>`. No keys configured leaves the API open.
 */
export function apiKeyAuth(keys: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    if (keys.length > 0 && !c.req.path.startsWith("/v2/health/")) {
      const given = bearer(c);
      // every key is compared, so the time taken does not say which one nearly matched
      const ok = given !== undefined && keys.map((k) => secretEquals(given, k)).includes(true);
      if (!ok)
        throw new FerryError(
          "UNAUTHORIZED",
          given === undefined ? "Missing API key" : "Invalid API key",
        );
    }
    await next();
  };
}

/** ADMIN_TOKEN guards /admin: unset, every admin route answers 403. */
export function adminAuth(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (token === undefined || token === "")
      throw new FerryError("FORBIDDEN", "Admin routes are disabled: ADMIN_TOKEN is not set");
    const given = bearer(c);
    if (given === undefined || !secretEquals(given, token))
      throw new FerryError("UNAUTHORIZED", "Invalid or missing admin token");
    await next();
  };
}
