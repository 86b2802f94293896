import { Readable } from "node:stream";
import { FerryError } from "@ferry/protocol";
import type { Context } from "hono";
import { errorResponse } from "./errors.js";

/**
 * A request body's chunks, read in paused mode so that a slow consumer holds the sender back.
 * Stopping early leaves the stream open (unlike a web stream or `for await` over the
 * Readable, which destroy it): a refused upload can then be `linger`ed out.
 */
export async function* bodyChunks(body: Readable): AsyncGenerator<Uint8Array> {
  let ended = false;
  let failure: Error | undefined;
  let wake: () => void = () => {};
  const onEnd = () => {
    ended = true;
    wake();
  };
  const onError = (err: Error) => {
    failure = err;
    wake();
  };
  const onReadable = () => wake();
  body.on("end", onEnd);
  body.on("error", onError);
  body.on("readable", onReadable);
  try {
    for (;;) {
      const chunk = body.read() as Uint8Array | null;
      if (chunk !== null) {
        yield chunk;
        continue;
      }
      // the client went away mid-body: nothing was accepted, a 4xx (a keyed request's key is
      // freed for its retry, where a 500 had kept it answered with the cut body's fingerprint)
      if (failure)
        throw new FerryError(
          "INVALID_INPUT",
          `the request body was cut off before its end (${failure.message})`,
        );
      if (ended || body.readableEnded) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    body.off("end", onEnd);
    body.off("error", onError);
    body.off("readable", onReadable);
  }
}

/** What a refused body is read out for at most before its connection is cut, in bytes. */
export const LINGER_BYTES = 64 * 1024 * 1024;

/**
 * Reads and drops what is left of a refused upload, up to `maxBytes`, so that the client,
 * still sending, reads the refusal instead of a reset connection (nginx's lingering close).
 * Past either bound (bytes, or `maxMs` for a sender that trickles) the connection is cut.
 */
export function linger(body: Readable, maxBytes: number, maxMs = 5_000): void {
  void readOut(body, maxBytes, maxMs);
}

/**
 * `refusal` sent at once, its connection closed only once the rest of the request's body is
 * read out (as `linger`): a response with "Connection: close" ends the socket the moment it is
 * written, and a client still sending (Python's http.client, curl on a slow link) gets a broken
 * pipe instead of the answer. The body goes out whole with its length, so a client that reads
 * while it sends has the answer at once.
 */
export async function lingering(
  refusal: Response,
  /** The body: the request's node stream, or the reader of its web stream where one was taken. */
  body: Readable | ReadableStreamDefaultReader<Uint8Array>,
  maxBytes = LINGER_BYTES,
  maxMs = 5_000,
): Promise<Response> {
  const bytes = new Uint8Array(await refusal.arrayBuffer());
  const headers = new Headers(refusal.headers);
  headers.set("Content-Length", String(bytes.byteLength));
  headers.set("Connection", "close");
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      const read =
        body instanceof Readable
          ? readOut(body, maxBytes, maxMs)
          : readOutReader(body, maxBytes, maxMs);
      void read.then(() => {
        try {
          controller.close();
        } catch {
          // the response was cancelled meanwhile (its client went): nothing left to end
        }
      });
    },
  });
  return new Response(stream, { status: refusal.status, headers });
}

/**
 * A route's answer to `err`, thrown while it read `body` in its own way (an upload, an NDJSON
 * batch): a refusal is answered `lingering`, so that a client still sending reads it (the
 * error handler's answer, sent at once, had the connection closed under a client with ~60 MB
 * left to send: the `openai` client's upload then failed with EPIPE and no status). Anything
 * else goes on to the error handler (which logs it), the body read out behind it.
 */
export function refusalOf(c: Context, err: unknown, body: Readable): Promise<Response> {
  if (!(err instanceof FerryError) || err.code === "INTERNAL") {
    linger(body, LINGER_BYTES);
    throw err;
  }
  return lingering(errorResponse(c, err), body);
}

/** Resolves once `body` has ended, or was cut past `maxBytes` read or `maxMs`. */
function readOut(body: Readable, maxBytes: number, maxMs: number): Promise<void> {
  if (body.readableEnded || body.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let dropped = 0;
    const cut = setTimeout(() => body.destroy(), maxMs);
    body.on("data", (chunk: Uint8Array) => {
      dropped += chunk.byteLength;
      if (dropped > maxBytes) body.destroy();
    });
    const done = () => {
      clearTimeout(cut);
      resolve();
    };
    body.once("end", done);
    body.once("close", done);
    body.resume();
  });
}

/**
 * As `readOut`, for a body whose web stream a reader holds: the node stream beneath it is
 * paused whenever the web stream's queue is full, so only reading through it drains it.
 */
async function readOutReader(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
  maxMs: number,
): Promise<void> {
  const cut = setTimeout(() => void reader.cancel().catch(() => undefined), maxMs);
  try {
    let dropped = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      dropped += value.byteLength;
      if (dropped > maxBytes) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // cut (cancelled past maxMs), or the client went: nothing left to read
  } finally {
    clearTimeout(cut);
  }
}
