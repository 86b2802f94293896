import { FerryError, MAX_TIMEOUT_MS } from "@ferry/protocol";
import type { Context } from "hono";
import type { CallOptions } from "./inference-service.js";

/**
 * Priority and deadline of a request: the body's fields win over the X-Priority and
 * X-Timeout-Ms headers.
 */
export function callOptions(
  c: Context,
  body: {
    priority?: number | undefined;
    timeout_ms?: number | undefined;
    cache?: boolean | undefined;
  },
): CallOptions {
  return {
    requestId: c.get("requestId") as string,
    priority: body.priority ?? intHeader(c, "X-Priority", 1, 10),
    timeoutMs: body.timeout_ms ?? intHeader(c, "X-Timeout-Ms", 1, MAX_TIMEOUT_MS),
    cache: body.cache ?? (c.req.header("Cache-Control")?.includes("no-cache") ? false : undefined),
  };
}

function intHeader(c: Context, name: string, min: number, max: number): number | undefined {
  const raw = c.req.header(name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new FerryError("INVALID_INPUT", `${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}
