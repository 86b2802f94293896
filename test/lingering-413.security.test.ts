import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

const repo = tempRepository({ digits: {} });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" } });
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
