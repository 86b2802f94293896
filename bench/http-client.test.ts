import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HttpConnection, parseResponse } from "./http-client.js";

let server: Server | undefined;

afterEach(async () => {
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A node:http server on a free port whose handler is `handle`; its URL. */
async function serve(handle: Parameters<typeof createServer>[1]): Promise<URL> {
  const s = createServer(handle);
  server = s;
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return new URL(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
}

/** The request's body, read whole. */
async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}

describe("HttpConnection", () => {
  it("sends the body and reads Content-Length and chunked answers over one connection", async () => {
    const peers = new Set<number | undefined>();
    const url = await serve(async (req, res) => {
      peers.add(req.socket.remotePort);
      const body = await bodyOf(req);
      if (req.url === "/chunked") {
        // writeHead, then writes: node:http sends it chunked, in two chunks
        res.writeHead(200, { "content-type": "application/json" });
        res.write(body.slice(0, 3));
        res.end(body.slice(3));
      } else res.end(body.toUpperCase());
    });
    const conn = new HttpConnection(url);
    const a = await conn.post("/length", '{"é":1}');
    expect(a.status).toBe(200);
    expect(a.body.toString()).toBe('{"É":1}');
    const b = await conn.post("/chunked", '{"features":[1,2,3]}');
    expect(b.status).toBe(200);
    expect(b.body.toString()).toBe('{"features":[1,2,3]}');
    expect(peers.size).toBe(1);
    conn.close();
  });

  it("reads Retry-After, and opens a new connection after a `Connection: close` answer", async () => {
    const peers: Array<number | undefined> = [];
    const url = await serve(async (req, res) => {
      await bodyOf(req);
      peers.push(req.socket.remotePort);
      res.writeHead(429, { "retry-after": "2", connection: "close" }).end("busy");
    });
    const conn = new HttpConnection(url);
    for (let i = 0; i < 3; i++) {
      const a = await conn.post("/", "{}");
      expect(a).toMatchObject({ status: 429, retryAfterS: 2 });
      expect(a.body.toString()).toBe("busy");
    }
    expect(new Set(peers).size).toBe(3);
    conn.close();
  });

  it("answers status 0 when the server drops the connection, and carries on after", async () => {
    let n = 0;
    const url = await serve(async (req, res) => {
      await bodyOf(req);
      if (n++ === 0) req.socket.destroy();
      else res.end("ok");
    });
    const conn = new HttpConnection(url);
    const dropped = await conn.post("/", "{}");
    expect(dropped.status).toBe(0);
    const next = await conn.post("/", "{}");
    expect(next.status).toBe(200);
    expect(next.body.toString()).toBe("ok");
    conn.close();
  });

  it("answers status 0 when nothing listens", async () => {
    const url = await serve((_req, res) => res.end());
    await new Promise((r) => server?.close(r));
    server = undefined;
    const a = await new HttpConnection(url).post("/", "{}");
    expect(a.status).toBe(0);
    expect(a.body.toString()).toContain("ECONNREFUSED");
  });
});

describe("parseResponse", () => {
  const chunked = Buffer.from(
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
  );

  it("waits for every byte of the answer, however it is split", () => {
    for (let cut = 0; cut < chunked.length; cut++)
      expect(parseResponse(chunked.subarray(0, cut))).toBeUndefined();
    expect(parseResponse(chunked)?.answer.body.toString()).toBe("abcde");
    const sized = Buffer.from("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\ndown");
    expect(parseResponse(sized.subarray(0, sized.length - 1))).toBeUndefined();
    expect(parseResponse(sized)).toEqual({
      answer: { status: 503, retryAfterS: 0, body: Buffer.from("down") },
      close: false,
    });
  });
});
