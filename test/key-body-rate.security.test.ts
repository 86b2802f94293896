import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// one key may send 128 KiB a second of large bodies, 2 MiB at once (twice MAX_BODY_BYTES): a
// slow refill, so that a loaded machine's slow requests do not pay a debt back between them
const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiEnv: {
    API_KEYS: "k1,k2,k3,k4",
    ADMIN_TOKEN: "adm",
    MAX_BODY_BYTES: String(1024 * 1024),
    KEY_BODY_BYTES_PER_S: String(128 * 1024),
  },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** A legal batch of ~600 KB the API reads whole before it refuses it (no such model). */
const large = JSON.stringify({
  model: "no-such-model",
  items: Array.from({ length: 17_000 }, (_, k) => ({ key: `k${k}`, features: [0, 0, 0, 0] })),
});
const send = (key: string, body = large) =>
  fetch(stack.url("/v1/batches"), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body,
  });

/** `body` sent chunked (no declared length): counted as it arrives. */
const postChunked = (key: string, path: string, body: string) =>
  fetch(stack.url(path), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(body));
        controller.close();
      },
    }),
    duplex: "half",
  } as RequestInit);

describe("large request bodies are held to a rate per key", () => {
  it("one key's back-to-back large bodies are refused past its rate, before they are parsed; another key's, its small ones and the admin's are not", async () => {
    // each was parsed whole on the API's loop (8 MB: ~150 ms), and one key sending them back
    // to back held every other key's requests behind them
    const statuses: number[] = [];
    for (let k = 0; k < 6; k++) statuses.push((await send("k1")).status);
    // 2 MiB at once: four of ~600 KB (the fourth taken with the bucket not yet in debt)
    expect(statuses.slice(0, 4)).toEqual([404, 404, 404, 404]);
    const refused = await send("k1");
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await refused.text()).toMatch(/KEY_BODY_BYTES_PER_S/);
    // a chunked body of a key in debt too (refused before it is read)
    const chunked = await postChunked("k1", "/v1/batches", large);
    expect(chunked.status).toBe(429);
    // another key, the same key's small bodies, the admin: untouched
    expect((await send("k2")).status).toBe(404);
    const small = JSON.stringify({
      input_file_id: "file-none",
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    expect((await send("k1", small)).status).toBe(404);
    expect((await send("adm")).status).toBe(404);
    // paid back at its rate: its debt, a few hundred KB, is paid within the wait
    await new Promise((r) => setTimeout(r, 4_000));
    expect((await send("k1")).status).toBe(404);
  });
});

/** `count` empty objects in a field no route reads: what parsing them costs, and no more bytes. */
const junk = (count: number) => `[${"{},".repeat(count - 1)}{}]`;
const features = samples.digits.inputs[0];
const postAs = (key: string, path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(stack.url(path), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}`, ...headers },
    body,
  });

describe("JSON bodies are weighed by the objects and lists they hold, not only their bytes", () => {
  it("refuses a body that would cost more to parse than its route's largest body, on every way in", async () => {
    // 600 KB (under the 1 MiB limit) that JSON.parse makes 200,000 objects of: ~75 ms of the
    // loop, where 600 KB of numbers is ~4 ms (8 MB of them had held it ~1.6 s)
    // (a model no budget of its own holds to: digits' refuses 600 KB by its length)
    const job = `{"model":"no-such-model","input":{"features":[1]},"junk":${junk(200_000)}}`;
    const refused = await postAs("k3", "/v1/jobs", job);
    expect(refused.status).toBe(413);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /costs more to read than its route's largest body \(1048576 bytes\)/,
    );
    // digits takes 262,144 bytes at most: 6,000 objects (12 KB) are past them, on the predict
    // fast path (a declared length) and Hono's route (chunked) alike
    const predict = `{"features":${JSON.stringify(features)},"junk":${junk(6_000)}}`;
    const fast = await postAs("k3", "/v1/models/digits/predict", predict);
    expect(fast.status).toBe(413);
    expect(await fast.text()).toMatch(/largest body \(262144 bytes\)/);
    const chunked = await postChunked("k3", "/v1/models/digits/predict", predict);
    expect(chunked.status).toBe(413);
    // Triton's binary form: its JSON head is weighed as a body
    const head = Buffer.from(
      `{"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","parameters":{"binary_data_size":256}}],"junk":${junk(6_000)}}`,
    );
    const binary = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: {
        "Content-Type": "application/octet-stream",
        Authorization: "Bearer k3",
        "Inference-Header-Content-Length": String(head.length),
      },
      body: Buffer.concat([head, Buffer.from(new Float32Array(64).buffer)]),
    });
    expect(binary.status).toBe(413);
    // and its tensors by the elements they make: 200 KB of BOOL (under digits' 262,144 bytes)
    // are 200,000 array elements the schema checks (~53 ms of the loop each, charged as bytes)
    const boolHead = Buffer.from(
      '{"inputs":[{"name":"input","shape":[200000],"datatype":"BOOL","parameters":{"binary_data_size":200000}}]}',
    );
    const bools = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: {
        "Content-Type": "application/octet-stream",
        Authorization: "Bearer k3",
        "Inference-Header-Content-Length": String(boolHead.length),
      },
      body: Buffer.concat([boolHead, Buffer.alloc(200_000, 1)]),
    });
    expect(bools.status).toBe(413);
    // the same requests without the objects are served
    expect(
      (await postAs("k3", "/v1/models/digits/predict", `{"features":${JSON.stringify(features)}}`))
        .status,
    ).toBe(200);
    expect(
      (
        await postAs(
          "k3",
          "/v1/jobs",
          `{"model":"digits","input":{"features":${JSON.stringify(features)}}}`,
        )
      ).status,
    ).toBe(202);
  });

  it("counts a small body dense in objects at its weight against its key's rate", async () => {
    // 60 KB, under the 64 KiB a body's length is counted from, weighing ~920 KB: its key's
    // 2 MiB burst takes two or three of them, where by length it took any number
    const heavy = `{"model":"no-such-model","input":{"features":[1]},"junk":${junk(20_000)}}`;
    const light = `{"model":"no-such-model","input":{"features":[1]},"junk":"${"x".repeat(60_000)}"}`;
    const statuses: number[] = [];
    for (let k = 0; k < 10; k++) statuses.push((await postAs("k4", "/v1/jobs", light)).status);
    expect(new Set(statuses)).toEqual(new Set([404]));
    statuses.length = 0;
    for (let k = 0; k < 5; k++) statuses.push((await postAs("k4", "/v1/jobs", heavy)).status);
    expect(statuses.slice(0, 2)).toEqual([404, 404]);
    expect(statuses).toContain(429);
    // another key is not held by it
    expect((await postAs("k3", "/v1/jobs", heavy)).status).toBe(404);
  });
});
