import { FerryError, MAX_TIMEOUT_MS } from "@ferry/protocol";
import type { TraceCarrier } from "@ferry/telemetry";
import type { Context } from "hono";
import type { HonoEnv } from "../services.js";
import type { CallOptions } from "./call.js";
import type { ServerTiming } from "./server-timing.js";
import { OPEN_TENANT, type Tenant } from "./tenant.js";

/** A request header by name (case-insensitive), as Hono or node:http gives it. */
export type HeaderReader = (name: string) => string | undefined;

/** The body fields that override a call's headers. */
export interface CallBody {
  priority?: number | undefined;
  timeout_ms?: number | undefined;
  cache?: boolean | undefined;
}

/**
 * Who a request acts for, its priority and its deadline, resolved once for every route: the
 * body's fields win over the X-Priority and X-Timeout-Ms headers.
 */
export function callOptions(c: Context<HonoEnv>, body: CallBody): CallOptions {
  return callOptionsFrom((name) => c.req.header(name), body, {
    requestId: c.get("requestId"),
    tenant: c.get("tenant") ?? OPEN_TENANT,
    releaseAdmission: c.get("releaseAdmission"),
    waitedMs: c.get("waitedMs"),
    timing: c.get("serverTiming"),
    jobs: c.get("namedJobs"),
    trace: c.get("trace"),
  });
}

/** `callOptions` outside Hono (the predict fast path). */
export function callOptionsFrom(
  header: HeaderReader,
  body: CallBody,
  from: {
    requestId: string;
    tenant: Tenant;
    releaseAdmission?: (() => void) | undefined;
    waitedMs?: number | undefined;
    timing?: ServerTiming | undefined;
    jobs?: string[] | undefined;
    trace?: TraceCarrier | undefined;
  },
): CallOptions {
  return {
    ...from,
    priority: allowedPriority(body.priority ?? intHeader(header, "X-Priority", 1, 10), from.tenant),
    timeoutMs: body.timeout_ms ?? timeoutHeader(header),
    cache: body.cache ?? noCache(header),
  };
}

/**
 * The priority a request asked, if its tenant may ask it: a key is held to KEY_MAX_PRIORITY
 * (its tenant's `maxPriority`), wherever in its request it asked (a job's own input too).
 */
export function allowedPriority(priority: number | undefined, tenant: Tenant): number | undefined {
  const ceiling = tenant.maxPriority;
  if (priority !== undefined && ceiling !== undefined && priority > ceiling)
    throw new FerryError(
      "INVALID_INPUT",
      `priority ${priority} is above the ${ceiling} an API key may ask on this server (KEY_MAX_PRIORITY)`,
    );
  return priority;
}

/** X-Timeout-Ms, when sent. */
export function timeoutHeader(header: HeaderReader): number | undefined {
  return intHeader(header, "X-Timeout-Ms", 1, MAX_TIMEOUT_MS);
}

/** false when `Cache-Control: no-cache` asks to skip the prediction cache. */
export function noCache(header: HeaderReader): false | undefined {
  return header("Cache-Control")?.includes("no-cache") ? false : undefined;
}

function intHeader(
  header: HeaderReader,
  name: string,
  min: number,
  max: number,
): number | undefined {
  const raw = header(name);
  if (raw === undefined) return undefined;
  // digits only: Number() would also take "0x5", "0b101", "1e0" and " 5"
  const value = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new FerryError("INVALID_INPUT", `${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}
