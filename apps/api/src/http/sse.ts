import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import type { Context } from "hono";
import type { HonoEnv } from "../services.js";

/** One server-sent event; `data` is one line (JSON or a sentinel such as "[DONE]"). */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

export interface SseStream {
  /** Writes an event; resolves at once unless the client reads slower than we write. */
  send(event: SseEvent): Promise<void>;
  /** Writes raw SSE lines: a comment (heartbeat) or a field such as `retry: 250`. */
  raw(text: string): Promise<void>;
  /** Called once when the client goes away before the stream ends. */
  onAbort(listener: () => void): void;
}

/**
 * Answers with an event stream written straight to Node's `ServerResponse`. Every token of
 * every stream passes through here, and Hono's `streamSSE` adds a web ReadableStream, a
 * TextEncoder pass and a reader loop on top of each socket write; on a busy API that is a
 * large part of what a token costs. Headers set on the context (X-Request-Id) are kept.
 */
export function sse(c: Context<HonoEnv>, run: (stream: SseStream) => Promise<void>): Response {
  const res = c.env.outgoing;
  const headers = c.newResponse(null).headers;
  headers.set("Content-Type", "text/event-stream");
  headers.set("Cache-Control", "no-cache");
  headers.set("Connection", "keep-alive");
  res.writeHead(200, Object.fromEntries(headers));
  res.flushHeaders();

  let ended = false;
  const listeners: Array<() => void> = [];
  res.once("close", () => {
    if (!ended) for (const listener of listeners.splice(0)) listener();
  });
  const write = (text: string): Promise<void> => {
    if (res.destroyed || res.writableEnded) return Promise.resolve();
    if (res.write(text)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        resolve();
      };
      res.on("drain", done);
      res.on("close", done);
    });
  };
  const stream: SseStream = {
    send: ({ id, event, data }) =>
      write(
        `${id === undefined ? "" : `id: ${id}\n`}${event ? `event: ${event}\n` : ""}data: ${data}\n\n`,
      ),
    raw: write,
    onAbort: (listener) => {
      listeners.push(listener);
    },
  };
  run(stream)
    .catch((err: unknown) => {
      // the status line is gone already; all a failure can still do is end the stream
      c.get("services").log.error({ err, path: c.req.path }, "event stream failed");
    })
    .finally(() => {
      ended = true;
      if (!res.writableEnded) res.end();
    });
  return RESPONSE_ALREADY_SENT;
}

/** Milliseconds between SSE comments that keep idle proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;

/**
 * Ties a resumable stream (one read from a job's log, which nothing loses) to its client and
 * to this replica's drain: `reading` is aborted when the client goes away or the drain starts
 * (the client resumes on another replica and misses nothing), and a comment every 15 s keeps
 * proxies from closing it while it is quiet. Returns what unties it.
 */
export function tieResumable(
  stream: SseStream,
  drain: AbortSignal,
  reading: AbortController,
): () => void {
  stream.onAbort(() => reading.abort());
  const onDrain = () => reading.abort();
  if (drain.aborted) onDrain();
  drain.addEventListener("abort", onDrain);
  const heartbeat = setInterval(() => void stream.raw(": keep-alive\n\n"), HEARTBEAT_MS);
  return () => {
    clearInterval(heartbeat);
    drain.removeEventListener("abort", onDrain);
  };
}
