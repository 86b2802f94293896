import { FerryError, MAX_TIMEOUT_MS } from "@ferry/protocol";
import type { Context } from "hono";
import type { CallOptions } from "./inference-service.js";
import type { AppEnv } from "./services.js";
import { OPEN_TENANT } from "./tenant.js";

/**
 * Who a request acts for, its priority and its deadline, resolved once for every route: the
 * body's fields win over the X-Priority and X-Timeout-Ms headers.
 */
export function callOptions(
  c: Context<AppEnv>,
  body: {
    priority?: number | undefined;
    timeout_ms?: number | undefined;
    cache?: boolean | undefined;
  },
): CallOptions {
  return {
    requestId: c.get("requestId"),
    tenant: c.get("tenant") ?? OPEN_TENANT,
    priority: body.priority ?? intHeader(c, "X-Priority", 1, 10),
    timeoutMs: body.timeout_ms ?? timeoutHeader(c),
    cache: body.cache ?? (c.req.header("Cache-Control")?.includes("no-cache") ? false : undefined),
    releaseAdmission: c.get("releaseAdmission"),
  };
}

/** X-Timeout-Ms, when sent. */
export function timeoutHeader(c: Context<AppEnv>): number | undefined {
  return intHeader(c, "X-Timeout-Ms", 1, MAX_TIMEOUT_MS);
}

function intHeader(c: Context<AppEnv>, name: string, min: number, max: number): number | undefined {
  const raw = c.req.header(name);
  if (raw === undefined) return undefined;
  // digits only: Number() would also take "0x5", "0b101", "1e0" and " 5"
  const value = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new FerryError("INVALID_INPUT", `${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}
