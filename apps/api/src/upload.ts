import type { Readable } from "node:stream";

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
      if (failure) throw failure;
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

/**
 * Reads and drops what is left of a refused upload, up to `maxBytes`, so that the client,
 * still sending, reads the refusal instead of a reset connection (nginx's lingering close).
 * Past either bound (bytes, or `maxMs` for a sender that trickles) the connection is cut.
 */
export function linger(body: Readable, maxBytes: number, maxMs = 5_000): void {
  if (body.readableEnded || body.destroyed) return;
  let dropped = 0;
  const cut = setTimeout(() => body.destroy(), maxMs);
  body.on("data", (chunk: Uint8Array) => {
    dropped += chunk.byteLength;
    if (dropped > maxBytes) body.destroy();
  });
  body.once("close", () => clearTimeout(cut));
  body.resume();
}
