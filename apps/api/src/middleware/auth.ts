import { createHash, timingSafeEqual } from "node:crypto";
import { FerryError } from "@ferry/protocol";
import type { Context, MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { ADMIN_ID, OPEN_TENANT, type Tenant } from "../http/tenant.js";

/** Compares secrets in constant time: both sides are hashed first, so lengths leak nothing. */
export function secretEquals(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 7235). */
export function bearer(c: Context): string | undefined {
  return bearerToken(c.req.header("Authorization"));
}

function bearerToken(authorization: string | undefined): string | undefined {
  return /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "")?.[1];
}

/** A key's tenant id: a digest, so that neither Redis nor the logs ever hold the key itself. */
export function tenantOf(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/**
 * API keys for /v1 and /v2 (health probes excepted), as OpenAI clients send them:
 * `Authorization: Bearer <key>`. Each key is a tenant: what it creates is its own. The admin
 * token is accepted here too and sees every tenant's work. No keys configured leaves the API
 * open, with one shared tenant.
 */
export function apiKeyAuth(authenticate: Authenticator): MiddlewareHandler {
  return async (c, next) => {
    c.set("tenant", authenticate(c.req.header("Authorization"), c.req.path));
    await next();
  };
}

/** The tenant a request's `Authorization` header names on `path`; throws UNAUTHORIZED. */
export type Authenticator = (authorization: string | undefined, path: string) => Tenant;

/**
 * The rule of `apiKeyAuth`, shared with callers outside Hono (the predict fast path).
 */
export function apiKeyAuthenticator(
  keys: readonly string[],
  adminToken: string | undefined,
  /** The highest priority a key may ask (KEY_MAX_PRIORITY); the admin may ask any. */
  keyMaxPriority = 10,
): Authenticator {
  const ceiling = keyMaxPriority < 10 ? { maxPriority: keyMaxPriority } : {};
  const tenants = keys.map((key) => ({
    key,
    tenant: { id: tenantOf(key), admin: false, ...ceiling },
  }));
  return (authorization, path) => {
    if (keys.length === 0 || path.startsWith("/v2/health/")) return OPEN_TENANT;
    const given = bearerToken(authorization);
    let tenant: Tenant | undefined;
    if (given !== undefined) {
      // every key is compared, so the time taken does not say which one nearly matched
      for (const t of tenants) if (secretEquals(given, t.key)) tenant = t.tenant;
      if (adminToken && secretEquals(given, adminToken)) tenant = { id: ADMIN_ID, admin: true };
    }
    if (!tenant)
      throw new FerryError(
        "UNAUTHORIZED",
        given === undefined ? "Missing API key" : "Invalid API key",
      );
    return tenant;
  };
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Whether a browser says the request comes from this server's own origin: `Sec-Fetch-Site:
 * same-origin`, else an `Origin` whose host and port are the request's own `Host`. A request
 * that says neither (no browser sends a cookie-bearing POST without one) is not.
 */
export function sameOrigin(c: Context): boolean {
  const site = c.req.header("Sec-Fetch-Site");
  if (site !== undefined) return site === "same-origin";
  const origin = c.req.header("Origin");
  if (origin === undefined || origin === "null") return false;
  try {
    return new URL(origin).host === c.req.header("Host");
  } catch {
    return false;
  }
}

/** The cookie a browser signs in to /admin with (HttpOnly, SameSite=Strict). */
export const ADMIN_COOKIE = "ferry_admin";

/**
 * ADMIN_TOKEN guards /admin: unset, every admin route answers 403. API clients send it as a
 * Bearer token; a browser signed in at /dashboard sends it as the admin cookie.
 */
export function adminAuth(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (token === undefined || token === "")
      throw new FerryError("FORBIDDEN", "Admin routes are disabled: ADMIN_TOKEN is not set");
    const header = bearer(c);
    const given = header ?? getCookie(c, ADMIN_COOKIE);
    if (given === undefined || !secretEquals(given, token))
      throw new FerryError("UNAUTHORIZED", "Invalid or missing admin token");
    // a browser sends its cookie with a form posted from any site: a change made by cookie
    // must come from this origin's own pages (SameSite does not cover another port)
    if (header === undefined && !SAFE_METHODS.has(c.req.method) && !sameOrigin(c))
      throw new FerryError(
        "FORBIDDEN",
        "Cross-site request refused: admin changes by cookie must come from this server's own pages (API clients send Authorization: Bearer)",
      );
    c.set("tenant", { id: ADMIN_ID, admin: true });
    await next();
  };
}
