import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/free-port.js";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

const probePort = await freePort();
const secured = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiEnv: {
    API_KEYS: "key-one, key-two",
    ADMIN_TOKEN: "admin-secret",
    LOG_LEVEL: "debug",
    PROBE_PORT: String(probePort),
  },
});
const open = new Stack({ workers: 0 });
beforeAll(() => Promise.all([secured.start(), open.start()]));
afterAll(() => Promise.all([secured.stop(), open.stop()]));

const features = samples.digits.inputs[0];
const auth = (token: string) => ({ Authorization: `Bearer ${token}` });

describe("API keys", () => {
  it("guard /v1 with 401s in OpenAI's shape, and let a listed key through", async () => {
    const none = await secured.post("/v1/models/digits/predict", { features });
    expect(none.status).toBe(401);
    // RFC 9110: a 401 says how to authenticate
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="ferry"');
    expect(await none.json()).toMatchObject({
      error: { type: "authentication_error", message: "Missing API key" },
    });
    expect(
      (await secured.post("/v1/models/digits/predict", { features }, auth("key-three"))).status,
    ).toBe(401);
    expect(
      (await secured.post("/v1/models/digits/predict", { features }, auth("key-two"))).status,
    ).toBe(200);
  });

  it("guard /v2 in KServe's shape, but not the health probes, /health or /metrics", async () => {
    const body = { inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }] };
    const res = await secured.post("/v2/models/digits/infer", body);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="ferry"');
    expect(await res.json()).toEqual({ error: "Missing API key" });
    expect((await secured.post("/v2/models/digits/infer", body, auth("key-one"))).status).toBe(200);
    for (const path of ["/v2/health/live", "/v2/health/ready", "/health", "/metrics"]) {
      expect((await fetch(secured.url(path))).status).toBe(200);
    }
  });

  it("leave the probe port (PROBE_PORT) the probes, /health and /metrics, unguarded, and nothing else", async () => {
    const probe = (path: string, init?: RequestInit) =>
      fetch(`http://127.0.0.1:${probePort}${path}`, init);
    expect(await (await probe("/v2/health/live")).json()).toEqual({ live: true });
    expect(await (await probe("/v2/health/ready")).json()).toEqual({ ready: true });
    expect(((await (await probe("/health")).json()) as { redis: string }).redis).toBe("up");
    expect(await (await probe("/metrics")).text()).toContain("ferry_");
    // the API itself is not there, with a key or without
    const post = { method: "POST", headers: { "content-type": "application/json" } };
    for (const [path, init] of [
      ["/v1/models/digits/predict", { ...post, body: JSON.stringify({ features }) }],
      ["/v1/models/digits/predict", { ...post, body: "{}", headers: auth("key-one") }],
      ["/v1/models", {}],
      ["/admin/models", { headers: auth("admin-secret") }],
      ["/v2/health/ready", { method: "POST" }],
    ] as const) {
      const res = await probe(path, init);
      expect(res.status).toBe(404);
      // in the shape of its path: OpenAI's under /v1, KServe's under /v2
      const { error } = (await res.json()) as { error: string | { message: string } };
      expect(typeof error === "string" ? error : error.message).toContain(
        "the probe port answers GET",
      );
    }
  });

  it("guard vLLM's /tokenize and /detokenize too (served without any worker of the model)", async () => {
    for (const [path, body] of [
      ["/tokenize", { model: "tiny-lm", prompt: "hi" }],
      ["/detokenize", { model: "tiny-lm", tokens: [104, 105] }],
    ] as const) {
      expect((await secured.post(path, body)).status).toBe(401);
      expect((await secured.post(path, body, auth("key-one"))).status).toBe(200);
    }
  });

  it("leave everything open when API_KEYS is unset", async () => {
    expect((await fetch(open.url("/v1/models"))).status).toBe(200);
  });
});

describe("admin token", () => {
  it("401 without or with a wrong token", async () => {
    expect((await fetch(secured.url("/admin/models"))).status).toBe(401);
    expect((await fetch(secured.url("/admin/models"), { headers: auth("nope") })).status).toBe(401);
    const ok = await fetch(secured.url("/admin/models"), { headers: auth("admin-secret") });
    expect([401, 403]).not.toContain(ok.status);
  });

  it("403 on every admin route when ADMIN_TOKEN is unset", async () => {
    expect((await fetch(open.url("/admin/models"), { headers: auth("anything") })).status).toBe(
      403,
    );
  });

  it("never logs a key or the token", () => {
    const logs = secured.api.output.join("");
    for (const secret of ["key-one", "key-two", "admin-secret"]) expect(logs).not.toContain(secret);
  });
});
