/**
 * Every failure Ferry reports has one of these codes; the API maps each to an HTTP status in
 * one place, and the worker sends the code over the wire so both sides agree.
 */
export const errorCodes = [
  "INVALID_INPUT",
  "MODEL_NOT_FOUND",
  "VERSION_NOT_FOUND",
  "JOB_NOT_FOUND",
  "NOT_FOUND",
  "METHOD_NOT_ALLOWED",
  "QUEUE_FULL",
  "DEADLINE_EXCEEDED",
  "CANCELLED",
  "MODEL_ERROR",
  "UNAVAILABLE",
  "UNAUTHORIZED",
  "FORBIDDEN",
  "PAYLOAD_TOO_LARGE",
  "QUOTA_EXCEEDED",
  "UNSUPPORTED_MEDIA_TYPE",
  "IDEMPOTENCY_KEY_REUSED",
  "IDEMPOTENCY_KEY_IN_USE",
  "INTERNAL",
] as const;
export type ErrorCode = (typeof errorCodes)[number];

export interface FerryErrorOptions {
  /** Seconds a client should wait before retrying (429 and 503). */
  retryAfterS?: number;
  cause?: unknown;
}

/** A failure with a code that says what went wrong, independent of the transport. */
export class FerryError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterS: number | undefined;

  constructor(code: ErrorCode, message: string, options: FerryErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "FerryError";
    this.code = code;
    this.retryAfterS = options.retryAfterS;
  }

  /**
   * An expected refusal (a full queue, a rate limit), made without capturing a stack trace:
   * under overload refusals are most of the work, and the trace would be most of a refusal's
   * cost while telling nothing (the code and message say it all).
   */
  static refusal(code: ErrorCode, message: string, options: FerryErrorOptions = {}): FerryError {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      return new FerryError(code, message, options);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && (errorCodes as readonly string[]).includes(value);
}
