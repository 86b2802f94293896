import { createHash } from "node:crypto";
import { FerryError } from "@ferry/protocol";
import { type StoredAnswer, UNKNOWN_FINGERPRINT } from "@ferry/transport";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { HonoEnv } from "../services.js";
import { bodyFingerprint } from "./body-fingerprint.js";
import { errorResponse, httpStatus, idempotencyKeyReused, toFerryError } from "./errors.js";

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
/** The draft's and Stripe's bound on a key. */
const MAX_KEY_CHARS = 255;
/** Headers an answer is replayed with (its body's type, where the created thing is). */
const KEPT_HEADERS = ["content-type", "location", "x-job-id"];

/**
 * The header's key: a bare token or an RFC 8941 string ("..."), 1-255 visible ASCII
 * characters; undefined when the request has none.
 */
export function idempotencyKeyOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const quoted = /^"((?:[^"\\]|\\.)*)"$/.exec(header);
  const key = quoted ? (quoted[1] ?? "").replace(/\\(.)/g, "$1") : header;
  if (key.length === 0 || key.length > MAX_KEY_CHARS || !/^[\x20-\x7e]+$/.test(key))
    throw new FerryError(
      "INVALID_INPUT",
      `${IDEMPOTENCY_HEADER} must be 1-${MAX_KEY_CHARS} visible ASCII characters`,
    );
  return key;
}

/**
 * A request's fingerprint, computed only when the request has a key: its method, path, query
 * and body (JSON with its keys sorted). `body` is the body as parsed, before any schema
 * dropped the fields it does not know: a retry that adds one is another payload.
 */
export function fingerprintOf(c: Context, body: unknown): () => string {
  return () => bodyFingerprint(fingerprintHead(c), body);
}

/**
 * `fingerprintOf` the request's JSON body, parsed again only when the request has a key: the
 * schema's copy has dropped fields, and a second parse of every body had doubled what a
 * large one cost the loop.
 */
export async function jsonFingerprint(c: Context): Promise<() => string> {
  return keyed(c) ? fingerprintOf(c, await c.req.json()) : UNKEYED.afterRun;
}

/** What a request's fingerprint begins with: its method, path and query. */
export function fingerprintHead(c: Context): string {
  const url = new URL(c.req.url);
  return `${c.req.method} ${url.pathname}${url.search}\n`;
}

/**
 * Whether the request names an Idempotency-Key: a body is fingerprinted only then (hashing a
 * 45 MB NDJSON batch took ~75 ms of the API's loop, for nothing without one).
 */
function keyed(c: Context): boolean {
  return c.req.header(IDEMPOTENCY_HEADER) !== undefined;
}

/** What an unkeyed request's body gives `idempotently`, which never asks it (no key, no claim). */
const UNKEYED: Streamed = {
  afterRun: () => {
    throw new Error("a request without an Idempotency-Key has no fingerprint");
  },
  readAll: async () => {
    throw new Error("a request without an Idempotency-Key has no fingerprint");
  },
};

/**
 * A streamed body's fingerprint, computed as `run` reads it (`chunks`), or by reading it all
 * to compare with a stored answer's; `maxBytes` bounds that read as the upload's own limit does.
 */
export function streamedFingerprint(
  c: Context,
  body: AsyncIterable<Uint8Array>,
  maxBytes: number,
): { chunks: AsyncIterable<Uint8Array>; streamed: Streamed } {
  if (!keyed(c)) return { chunks: body, streamed: UNKEYED };
  const hash = createHash("sha256").update(fingerprintHead(c));
  async function* chunks() {
    for await (const chunk of body) {
      hash.update(chunk);
      yield chunk;
    }
  }
  return {
    chunks: chunks(),
    streamed: {
      afterRun: () => hash.copy().digest("base64url"),
      async readAll() {
        let bytes = 0;
        for await (const chunk of body) {
          bytes += chunk.byteLength;
          if (bytes > maxBytes)
            throw new FerryError("PAYLOAD_TOO_LARGE", `the body is over ${maxBytes} bytes`);
          hash.update(chunk);
        }
        // a copy's: the answer kept after it reads the fingerprint again (`afterRun`)
        return hash.copy().digest("base64url");
      },
    },
  };
}

/**
 * A streamed body's fingerprint over what it says rather than its bytes (`digest` of each item
 * as `run` reads it): a multipart body's boundary is drawn afresh for every request, its
 * retries included. `items` must bound what it reads, as it does for `run`.
 */
export function parsedFingerprint<T>(
  c: Context,
  items: AsyncIterable<T>,
  digest: (item: T) => string | Uint8Array,
): { items: AsyncIterable<T>; streamed: Streamed } {
  if (!keyed(c)) return { items, streamed: UNKEYED };
  const hash = createHash("sha256").update(fingerprintHead(c));
  async function* hashed() {
    for await (const item of items) {
      hash.update(digest(item));
      yield item;
    }
  }
  const read = hashed();
  return {
    items: read,
    streamed: {
      afterRun: () => hash.copy().digest("base64url"),
      async readAll() {
        for await (const _item of read);
        // a copy's: the answer kept after it reads the fingerprint again (`afterRun`)
        return hash.copy().digest("base64url");
      },
    },
  };
}

/**
 * The id a keyed request's job or batch takes: the same for every retry of that request (a
 * takeover's too), UUID-shaped; `since`, the first claim's time, makes the key used again
 * after it expired a new request, not the old job found again.
 */
function createdIdOf(scope: string, key: string, path: string, since: string): string {
  const named = since
    ? `${scope}\u0000${key}\u0000${path}\u0000${since}`
    : `${scope}\u0000${key}\u0000${path}`;
  const h = createHash("sha256").update(named).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** An answer worth replaying: what was created (2xx), or a failure once it was accepted (500). */
function kept(status: number): boolean {
  return status < 400 || status === 500;
}

export interface KeyedRun {
  /** The id what the request creates takes (`CallOptions.createdId`); undefined without a key. */
  createdId: string | undefined;
  /**
   * An earlier attempt with this key went quiet after claiming it (its replica died, or it
   * failed after writing): what it made may exist; look for it under `createdId` first.
   */
  takeover: boolean;
}

/** A route whose answer may be an event stream: how a retry gets the stream again. */
export interface StreamedAnswer<R> {
  /** The answer again, for a retry: `createdId` names what the first request created. */
  replay(createdId: string): Promise<R>;
}

/** What a replayed answer carries (the draft's name for it). */
const REPLAYED_HEADER = "Idempotent-Replayed";

/** Marks a kept answer that was an event stream (not kept: `StreamedAnswer.replay`). */
const STREAM_MARK = "x-ferry-replay-stream";

export interface Streamed {
  /** The body's fingerprint once `run` has read it all. */
  afterRun(): string;
  /** Reads the body (not yet read) to its end and returns its fingerprint, to compare. */
  readAll(): Promise<string>;
}

/**
 * Runs a request that creates something under its Idempotency-Key, per
 * draft-ietf-httpapi-idempotency-key-header: without a key it just runs; the first with a key
 * runs and its answer is kept (IDEMPOTENCY_TTL_S) for retries to replay
 * (`Idempotent-Replayed: true`); the same key with another payload is a 422, and while the
 * first is still being accepted a 409 with Retry-After. A refusal before anything was accepted
 * (a 4xx: validation, a full queue) keeps nothing, so a corrected retry may use the key.
 * `body`: the request's fingerprint, or for a streamed body what computes it (`streamedFingerprint`).
 */
export async function idempotently<R extends Response>(
  c: Context<HonoEnv>,
  body: (() => string) | Streamed,
  run: (keyed: KeyedRun) => Promise<R>,
  stream?: StreamedAnswer<R>,
): Promise<R> {
  const streamed = typeof body === "function" ? undefined : body;
  const key = idempotencyKeyOf(c.req.header(IDEMPOTENCY_HEADER));
  if (key === undefined) return run({ createdId: undefined, takeover: false });
  const fingerprint = typeof body === "function" ? body() : UNKNOWN_FINGERPRINT;
  const scope = c.get("tenant").id;
  const store = c.get("services").client.idempotency;
  const claim = await store.claim(scope, key, fingerprint);
  if (claim.kind === "reused") throw idempotencyKeyReused();
  if (claim.kind === "in-progress")
    throw new FerryError(
      "IDEMPOTENCY_KEY_IN_USE",
      `A request with this ${IDEMPOTENCY_HEADER} is still being accepted; retry after it answers`,
      { retryAfterS: 1 },
    );
  if (claim.kind === "answered") {
    if (streamed) {
      const read = await streamed.readAll();
      if (claim.fingerprint !== UNKNOWN_FINGERPRINT && read !== claim.fingerprint)
        throw idempotencyKeyReused();
    }
    // on the context, so that the stream's head (`sse`) carries it as the kept answer's does
    c.header(REPLAYED_HEADER, "true");
    if (stream && claim.answer.headers[STREAM_MARK] !== undefined)
      return stream.replay(claim.answer.body);
    // typed as the route's own answer: it is one, sent before (or its 500)
    return replay(c, claim.answer) as R;
  }
  let res: R;
  const keyed = {
    createdId: createdIdOf(scope, key, c.req.path, claim.since),
    takeover: claim.takeover,
  };
  // a request still running (an upload streaming in) keeps its claim from going stale
  const unkeep = store.keepClaimed(scope, key, claim.attempt);
  try {
    res = await run(keyed);
  } catch (err) {
    const error = toFerryError(err);
    if (error.code === "IDEMPOTENCY_KEY_REUSED") {
      // a takeover that found what the key made, for another payload: that stays the key's,
      // for the next retry to find again (freed, the key would make it a second time)
      await store.abandon(scope, key, fingerprint, claim).catch(() => undefined);
      throw err;
    }
    if (!kept(httpStatus(error.code))) {
      await forgo(c, scope, key, fingerprint, claim, httpStatus(error.code));
      throw err;
    }
    res = errorResponse(c, error) as R;
  } finally {
    unkeep();
  }
  if (!kept(res.status)) {
    await forgo(c, scope, key, fingerprint, claim, res.status);
    return res;
  }
  const final = streamed ? streamed.afterRun() : fingerprint;
  const createdId = keyed.createdId ?? "";
  // an event stream (written to the connection itself: `sse`) is not kept: its retry streams
  // what it created again, from its start
  if (stream && c.env?.outgoing?.headersSent === true) {
    const headers = { [STREAM_MARK]: "1" };
    await store.answer(scope, key, final, { status: res.status, body: createdId, headers }, claim);
    return res;
  }
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = res.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  await store.answer(
    scope,
    key,
    final,
    { status: res.status, body: await res.clone().text(), headers },
    claim,
  );
  return res;
}

/**
 * A refused request (4xx) made nothing: the key is freed. One that failed otherwise (503,
 * 504) may have written what it creates before failing: the next retry takes its claim over
 * and looks for that first. (Redis failing here too leaves the claim to go stale.)
 */
async function forgo(
  c: Context<HonoEnv>,
  scope: string,
  key: string,
  fingerprint: string,
  claim: { since: string; attempt: string },
  status: number,
) {
  const store = c.get("services").client.idempotency;
  const done =
    status >= 500
      ? store.abandon(scope, key, fingerprint, claim)
      : store.release(scope, key, claim.attempt);
  await done.catch(() => undefined);
}

/** The kept answer, with the headers this request's context has (its X-Request-Id, say). */
function replay(c: Context<HonoEnv>, answer: StoredAnswer): Response {
  const res = c.newResponse(answer.body, answer.status as ContentfulStatusCode);
  for (const [name, value] of Object.entries(answer.headers)) res.headers.set(name, value);
  return res;
}
