import { createReadStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

const repo = tempRepository({ digits: {} });
// file storage of 20 MB: an upload of ~60 MB is refused on its declared length, at its start
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits", FILE_STORAGE_PER_KEY_BYTES: "20000000" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/**
 * A request as Python's http.client sends one: "Connection: close", the whole body written
 * before the answer is read. Resolves with the answer's text, or the socket's error (EPIPE,
 * ECONNRESET) when the server cut the connection while the body was still going out.
 */
function sendAllThenRead(path: string, body: Buffer): Promise<string> {
  const { port } = new URL(stack.url("/"));
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let answer = "";
    let ended = false;
    let sent = false;
    const settle = () => {
      if (ended && sent) resolve(answer);
    };
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("end", () => {
      ended = true;
      settle();
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
    );
    // as http.client's sendall: the whole body must go out, or the request failed
    socket.write(body, (err) => {
      if (err) reject(err);
      sent = true;
      settle();
    });
  });
}

describe("a body over the limit is refused with a 413 every client can read", () => {
  const big = Buffer.from(JSON.stringify({ features: new Array(2_000_000).fill(1.2345) }));

  it("Python-style (everything sent first, then read): the 413 and its JSON, not a broken pipe", async () => {
    expect(big.length).toBeGreaterThan(12_000_000);
    // a model's routes by what its inputs could need, the rest by MAX_BODY_BYTES
    for (const [path, limit] of [
      ["/v1/models/digits/predict", "262144 bytes, the most model 'digits' takes"],
      ["/v2/models/digits/infer", "262144 bytes, the most model 'digits' takes"],
      ["/v1/jobs", "8388608 bytes"],
    ]) {
      const answer = await sendAllThenRead(path as string, big);
      expect(answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
      expect(answer).toContain(`Request body exceeds ${limit}`);
    }
  });

  it("fetch (undici, what the openai client uses): the 413 readable", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(stack.url("/v1/models/digits/predict"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: big,
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        "payload_too_large",
      );
    }
  });

  it("the API keeps serving after many refused bodies", async () => {
    await Promise.all(
      Array.from({ length: 4 }, () => sendAllThenRead("/v1/models/digits/predict", big)),
    );
    const res = await stack.post("/v1/models/digits/predict", { features: new Array(64).fill(0) });
    expect(res.status).toBe(200);
  });
});

describe("a route that reads its body its own way answers a refusal every client can read", () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-linger-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** ~60 MB of lines: `line(k)` each, written to a file. */
  const file = (name: string, line: (k: number) => string) => {
    const lines: string[] = [];
    for (let k = 0; lines.length * 220 < 60_000_000; k++) lines.push(line(k));
    const path = join(dir, name);
    writeFileSync(path, `${lines.join("\n")}\n`);
    return path;
  };
  const features = JSON.stringify(new Array(64).fill(1));

  it("an upload past its tenant's file storage: the openai client reads the 403, not a broken pipe", async () => {
    const path = file("big.jsonl", (k) =>
      JSON.stringify({
        custom_id: `r${k}`,
        method: "POST",
        url: "/v1/models/digits/predict",
        body: { features: JSON.parse(features) },
      }),
    );
    const openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const err = await openai.files.create({ file: createReadStream(path), purpose: "batch" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("quota_exceeded");
  });

  it("an NDJSON batch refused at an early line while ~60 MB of it is still coming: fetch reads the 400", async () => {
    const path = file("big.ndjson", (k) =>
      k === 10 ? '{"key":"bad","features":"none"}' : `{"key":"r${k}","features":${features}}`,
    );
    const res = await fetch(stack.url("/v1/batches?model=digits"), {
      method: "POST",
      headers: { "content-type": "application/x-ndjson" },
      // a Node stream, sent as it is read (undici takes it; the DOM's types do not say so)
      body: createReadStream(path) as unknown as ReadableStream,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
      "item 11",
    );
  });
});
