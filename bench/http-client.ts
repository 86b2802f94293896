import { Agent, request } from "node:http";
import { connect, type Socket } from "node:net";

/** One HTTP answer as the load generator keeps it. */
export interface Answer {
  /** The status code; 0 when no answer came (the connection failed or closed first). */
  status: number;
  /** Retry-After in seconds (0 when absent). */
  retryAfterS: number;
  /** The body (empty when none); for status 0, what went wrong. */
  body: Buffer;
}

/** One client's connection: a request at a time; a failure is an answer of status 0. */
export interface Connection {
  post(path: string, body: string): Promise<Answer>;
  close(): void;
}

const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");

/**
 * One keep-alive HTTP/1.1 connection of a load generator, one request at a time, reopened
 * when the server closed it. The bench's clients share this machine's two cores with the stack
 * they measure: node:http's client cost 120-135 us of CPU a request and undici's 100-106 (64
 * clients on the in-process server, side by side), a third of what the whole Ferry stack
 * spends on a request, taken from it; this costs ~60. wrk, which costs less still, reports
 * neither latency per status nor lets a client wait the Retry-After it is given.
 *
 * It reads what the servers measured here send (Content-Length or chunked bodies,
 * `Connection: close`) and nothing else: no redirects, no 1xx, no pipelining.
 */
export class HttpConnection implements Connection {
  private socket: Socket | undefined;
  private opening: Promise<Socket> | undefined;
  private received: Buffer | undefined;
  private pending: ((answer: Answer) => void) | undefined;
  private readonly hostHeader: string;

  constructor(private readonly url: URL) {
    this.hostHeader = url.host;
  }

  /** POSTs `body` (JSON) to `path`; never rejects: a failure is an answer of status 0. */
  async post(path: string, body: string): Promise<Answer> {
    let socket: Socket;
    try {
      socket = await this.ensureOpen();
    } catch (err) {
      return failure(err);
    }
    return new Promise<Answer>((resolve) => {
      this.pending = resolve;
      this.received = undefined;
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  private ensureOpen(): Promise<Socket> {
    if (this.socket) return Promise.resolve(this.socket);
    this.opening ??= new Promise<Socket>((resolve, reject) => {
      const socket = connect(Number(this.url.port || 80), this.url.hostname);
      socket.setNoDelay(true);
      let connected = false;
      let lastError: unknown;
      socket.once("connect", () => {
        connected = true;
        this.opening = undefined;
        this.socket = socket;
        resolve(socket);
      });
      // a socket this connection has let go of (closed after a `Connection: close` answer)
      // says nothing about the request of the one that replaced it
      socket.on("data", (chunk: Buffer) => {
        if (this.socket === socket) this.onData(chunk);
      });
      socket.on("error", (err) => {
        lastError = err;
        if (connected) return;
        this.opening = undefined;
        reject(err);
      });
      socket.on("close", () => {
        if (this.socket !== socket) return;
        this.socket = undefined;
        this.settle(
          failure(lastError ?? new Error("the server closed the connection before answering")),
        );
      });
    });
    return this.opening;
  }

  private settle(answer: Answer): void {
    const resolve = this.pending;
    this.pending = undefined;
    this.received = undefined;
    resolve?.(answer);
  }

  private onData(chunk: Buffer): void {
    const buf = this.received ? Buffer.concat([this.received, chunk]) : chunk;
    const parsed = parseResponse(buf);
    if (!parsed) {
      this.received = buf;
      return;
    }
    if (parsed.close) this.close();
    this.settle(parsed.answer);
  }
}

/** A whole response at the start of `buf`, or undefined while more of it is to come. */
export function parseResponse(buf: Buffer): { answer: Answer; close: boolean } | undefined {
  const headEnd = buf.indexOf(HEAD_END);
  if (headEnd < 0) return undefined;
  const lines = buf.toString("latin1", 0, headEnd).split("\r\n");
  const status = Number(lines[0]?.slice(9, 12));
  let length: number | undefined;
  let chunked = false;
  let retryAfterS = 0;
  let close = lines[0]?.startsWith("HTTP/1.0") ?? false;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "content-length") length = Number(value);
    else if (name === "transfer-encoding") chunked = value.toLowerCase().includes("chunked");
    else if (name === "retry-after") retryAfterS = Number(value) || 0;
    else if (name === "connection") close = value.toLowerCase() === "close";
  }
  const bodyStart = headEnd + HEAD_END.length;
  let body: Buffer;
  if (chunked) {
    const pieces: Buffer[] = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = buf.indexOf(CRLF, at);
      if (lineEnd < 0) return undefined;
      const size = Number.parseInt(buf.toString("latin1", at, lineEnd), 16);
      const dataEnd = lineEnd + CRLF.length + size;
      // each chunk's data ends with CRLF; the last (size 0) is followed by the empty trailer
      if (buf.length < dataEnd + CRLF.length) return undefined;
      if (size === 0) break;
      pieces.push(buf.subarray(lineEnd + CRLF.length, dataEnd));
      at = dataEnd + CRLF.length;
    }
    body = Buffer.concat(pieces);
  } else {
    // without a length an HTTP/1.1 response to a POST has no body here (204, 304, or a
    // server that closes to end it: none of those is measured)
    if (buf.length < bodyStart + (length ?? 0)) return undefined;
    body = buf.subarray(bodyStart, bodyStart + (length ?? 0));
  }
  return { answer: { status, retryAfterS, body }, close };
}

function failure(err: unknown): Answer {
  return { status: 0, retryAfterS: 0, body: Buffer.from(String(err)) };
}

/**
 * The same client on node:http's (one keep-alive socket): what the bench used before
 * `HttpConnection`, kept to show side by side what the generator's own CPU takes from a run.
 */
export class NodeHttpConnection implements Connection {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });

  constructor(private readonly url: URL) {}

  post(path: string, body: string): Promise<Answer> {
    return new Promise((resolve) => {
      const req = request(
        {
          agent: this.agent,
          host: this.url.hostname,
          port: this.url.port,
          path,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              retryAfterS: Number(res.headers["retry-after"] ?? 0) || 0,
              body: Buffer.concat(chunks),
            }),
          );
        },
      );
      req.on("error", (err) => resolve(failure(err)));
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
