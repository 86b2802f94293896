import { type ErrorCode, FerryError, type JobEvent } from "@ferry/protocol";
import { redisUnavailable } from "@ferry/transport";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

const httpStatusOf: Record<ErrorCode, ContentfulStatusCode> = {
  INVALID_INPUT: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  QUOTA_EXCEEDED: 403,
  MODEL_NOT_FOUND: 404,
  VERSION_NOT_FOUND: 404,
  JOB_NOT_FOUND: 404,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CANCELLED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IDEMPOTENCY_KEY_REUSED: 422,
  IDEMPOTENCY_KEY_IN_USE: 409,
  QUEUE_FULL: 429,
  MODEL_ERROR: 500,
  INTERNAL: 500,
  UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

/** OpenAI's error `type` for each code. */
const openAiType: Record<ErrorCode, string> = {
  INVALID_INPUT: "invalid_request_error",
  UNAUTHORIZED: "authentication_error",
  FORBIDDEN: "permission_error",
  QUOTA_EXCEEDED: "insufficient_quota",
  MODEL_NOT_FOUND: "not_found_error",
  VERSION_NOT_FOUND: "not_found_error",
  JOB_NOT_FOUND: "not_found_error",
  NOT_FOUND: "not_found_error",
  METHOD_NOT_ALLOWED: "invalid_request_error",
  CANCELLED: "cancelled_error",
  PAYLOAD_TOO_LARGE: "invalid_request_error",
  UNSUPPORTED_MEDIA_TYPE: "invalid_request_error",
  IDEMPOTENCY_KEY_REUSED: "invalid_request_error",
  IDEMPOTENCY_KEY_IN_USE: "conflict_error",
  QUEUE_FULL: "rate_limit_error",
  MODEL_ERROR: "server_error",
  INTERNAL: "server_error",
  UNAVAILABLE: "service_unavailable_error",
  DEADLINE_EXCEEDED: "timeout_error",
};

export function httpStatus(code: ErrorCode): ContentfulStatusCode {
  return httpStatusOf[code];
}

/** Any thrown value as a FerryError: HTTPExceptions keep their status's meaning. */
export function toFerryError(err: unknown): FerryError {
  if (err instanceof FerryError) return err;
  if (err instanceof HTTPException) {
    // Hono's JSON validator, on a body of another declared type: say what to send
    if (err.message === "Unsupported Media Type")
      return new FerryError(
        "UNSUPPORTED_MEDIA_TYPE",
        "Unsupported Media Type: send the body as JSON, with Content-Type: application/json",
      );
    const code: ErrorCode =
      err.status === 413
        ? "PAYLOAD_TOO_LARGE"
        : err.status === 401
          ? "UNAUTHORIZED"
          : err.status < 500
            ? "INVALID_INPUT"
            : "INTERNAL";
    return new FerryError(code, err.message || "bad request");
  }
  return redisUnavailable(err) ?? new FerryError("INTERNAL", "internal error", { cause: err });
}

/**
 * The one place errors become HTTP: KServe's `{"error": "..."}` under /v2, OpenAI's
 * `{"error": {message, type, code}}` everywhere else.
 */
/**
 * The challenge a 401 carries (RFC 9110: a 401 must say how to authenticate): a bearer token,
 * an API key or the admin token.
 */
export const AUTH_CHALLENGE = 'Bearer realm="ferry"';

export function errorResponse(c: Context, err: FerryError): Response {
  if (err.retryAfterS !== undefined) c.header("Retry-After", String(err.retryAfterS));
  if (err.code === "UNAUTHORIZED") c.header("WWW-Authenticate", AUTH_CHALLENGE);
  return c.json(errorBody(c.req.path, err), httpStatus(err.code));
}

/** What `errorResponse` sends for `err` on `path` (shared by the predict fast path). */
export function errorBody(path: string, err: FerryError): unknown {
  if (path.startsWith("/v2/")) return { error: err.message };
  return {
    error: { message: err.message, type: openAiType[err.code], code: err.code.toLowerCase() },
  };
}

/** A schema's failure as one 400 that names the field and the problem. */
export function invalidInput(issues: ReadonlyArray<Issue>): FerryError {
  const issue = issues[0] && explained(issues[0]);
  const where = issue?.path.length ? `${issue.path.map(String).join(".")}: ` : "";
  return new FerryError("INVALID_INPUT", `${where}${issue?.message ?? "invalid request"}`);
}

/** A schema's issue, as zod words it; a union's carries each branch's own. */
type Issue = { path: PropertyKey[]; message: string; code?: string; errors?: Issue[][] };

/**
 * A union's issue as the one branch that took the value's type said it (a schema sent as text
 * and refused for its weight had been "Invalid input"); the union's own where none or several
 * did.
 */
function explained(issue: Issue): Issue {
  if (issue.code !== "invalid_union" || !issue.errors) return issue;
  const reached = issue.errors.filter(
    (branch) => branch.length > 0 && branch.every((inner) => inner.code !== "invalid_type"),
  );
  const inner = reached.length === 1 ? reached[0]?.[0] : undefined;
  return inner ? { ...inner, path: [...issue.path, ...inner.path] } : issue;
}

/** An async job input's issues as a 400, their paths under `input`, where the caller put them. */
export function invalidJobInput(issues: ReadonlyArray<Issue>): FerryError {
  return invalidInput(issues.map((issue) => ({ ...issue, path: ["input", ...issue.path] })));
}

/** The error a job's error event carries, as the API raises it. */
export function errorOf(event: JobEvent): FerryError {
  if (event.body.type !== "error") return new FerryError("INTERNAL", "not an error event");
  const { code, message } = event.body.error;
  return new FerryError(code as FerryError["code"], message);
}

/** The same key sent with another payload (422); a route that finds what a key made may say so. */
export function idempotencyKeyReused(): FerryError {
  return new FerryError(
    "IDEMPOTENCY_KEY_REUSED",
    `This Idempotency-Key was used with another request payload; a new request needs a new key`,
  );
}
