import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { type Proc, Stack } from "./helpers/stack.js";

// One worker, two API processes on the same queues: one serves predict through its fast path
// (the default), the other through Hono's route (PREDICT_FAST_PATH=off), the reference.
const stack = new Stack({
  env: { WORKER_MODELS: "mnist" },
  apiEnv: { API_KEYS: "key-one,key-two" },
});
let fastUrl = "";
let fastApi: Proc | undefined;
let honoUrl = "";

beforeAll(async () => {
  await stack.start();
  fastUrl = stack.baseUrl;
  fastApi = stack.api;
  await stack.startApi({ PREDICT_FAST_PATH: "off" });
  honoUrl = stack.baseUrl;
}, 90_000);
afterAll(async () => {
  fastApi?.child.kill("SIGKILL");
  await fastApi?.exited;
  await stack.stop();
});

const features = samples.mnist.inputs[0] ?? [];
const KEY = { Authorization: "Bearer key-one", "Cache-Control": "no-cache" };

interface Case {
  name: string;
  model?: string;
  body: string;
  headers?: Record<string, string>;
}

const cases: Case[] = [
  { name: "a valid row", body: JSON.stringify({ features }) },
  { name: "a valid row with fields it ignores", body: JSON.stringify({ features, extra: 1 }) },
  {
    name: "the body's priority and timeout",
    body: JSON.stringify({ features, priority: 9, timeout_ms: 5_000 }),
  },
  {
    name: "a request id of the client's",
    body: JSON.stringify({ features }),
    headers: { "X-Request-Id": "client-id-1" },
  },
  { name: "no API key", body: JSON.stringify({ features }), headers: { Authorization: "" } },
  {
    name: "a wrong API key",
    body: JSON.stringify({ features }),
    headers: { Authorization: "Bearer nope" },
  },
  { name: "an unknown model", model: "no-such-model", body: JSON.stringify({ features }) },
  { name: "a generator model", model: "tiny-lm", body: JSON.stringify({ features }) },
  { name: "malformed JSON", body: "{" },
  { name: "JSON null", body: "null" },
  { name: "no features", body: "{}" },
  { name: "too few features", body: JSON.stringify({ features: [1, 2, 3] }) },
  {
    name: "a feature that is a string",
    body: JSON.stringify({ features: ["1", ...features.slice(1)] }),
  },
  { name: "priority 11", body: JSON.stringify({ features, priority: 11 }) },
  { name: "a negative timeout_ms", body: JSON.stringify({ features, timeout_ms: -1 }) },
  {
    name: "X-Priority that is not a number",
    body: JSON.stringify({ features }),
    headers: { "X-Priority": "0x5" },
  },
  {
    name: "X-Timeout-Ms of 0",
    body: JSON.stringify({ features }),
    headers: { "X-Timeout-Ms": "0" },
  },
  {
    name: "a text/plain body (Hono on both)",
    body: JSON.stringify({ features }),
    headers: { "Content-Type": "text/plain" },
  },
];

async function send(base: string, c: Case) {
  const res = await fetch(`${base}/v1/models/${c.model ?? "mnist"}/predict`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...KEY, ...c.headers },
    body: c.body,
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // compared as text
  }
  // the one field that differs between two runs of the same request
  if (body && typeof body === "object" && "latency_ms" in body) {
    expect(typeof body.latency_ms).toBe("number");
    delete body.latency_ms;
  }
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    retryAfter: res.headers.get("retry-after"),
    requestId: res.headers.get("x-request-id"),
    body,
  };
}

describe("the predict fast path answers as Hono's route does", () => {
  for (const c of cases) {
    it(c.name, async () => {
      const [fast, hono] = [await send(fastUrl, c), await send(honoUrl, c)];
      const own = c.headers?.["X-Request-Id"];
      for (const r of [fast, hono])
        if (own) expect(r.requestId).toBe(own);
        else expect(r.requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect({ ...fast, requestId: 0 }).toEqual({ ...hono, requestId: 0 });
    });
  }

  it("covers answers, refusals of each kind, and both error shapes' fields", async () => {
    const statuses = new Set<number>();
    for (const c of cases) statuses.add((await send(fastUrl, c)).status);
    // (a body of another media type: 415, saying what to send)
    expect([...statuses].sort()).toEqual([200, 400, 401, 404, 415]);
    const ok = await send(fastUrl, cases[0] as Case);
    expect(ok.body).toMatchObject({ source: "model", model_version: "1" });
  });

  it("is counted in the HTTP metrics under the route's pattern, as Hono counts it", async () => {
    const line = (text: string) =>
      text
        .split("\n")
        .find((l) =>
          l.startsWith(
            'ferry_http_requests_total{route="/v1/models/:name/predict",method="POST",status="200"}',
          ),
        );
    for (const base of [fastUrl, honoUrl]) {
      const text = await (await fetch(`${base}/metrics`)).text();
      expect(Number(line(text)?.split(" ").at(-1))).toBeGreaterThanOrEqual(4);
    }
  });
});
