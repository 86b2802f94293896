import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// Two tenants (API keys) and the admin, on one deployment; a second stack with per-key limits.
const stack = new Stack({
  env: { WORKER_MODELS: "digits,tiny-lm" },
  apiEnv: { API_KEYS: "k1,k2", ADMIN_TOKEN: "root" },
});
const limited = new Stack({
  workers: 0,
  apiEnv: {
    API_KEYS: "k1,k2",
    KEY_RATE_LIMIT_RPS: "5",
    KEY_RATE_BURST: "5",
    KEY_MAX_CONCURRENT: "2",
  },
});
beforeAll(() => Promise.all([stack.start(), limited.start()]));
afterAll(() => Promise.all([stack.stop(), limited.stop()]));

const as = (key: string) => ({ Authorization: `Bearer ${key}` });
const features = samples.digits.inputs[3] ?? [];
const get = (path: string, key: string, s = stack) => fetch(s.url(path), { headers: as(key) });

describe("jobs and completions belong to the key that created them", () => {
  it("a stored response (OpenAI's Responses API) too: another key can neither read, stream, list, cancel, delete nor continue it", async () => {
    const create = (body: Record<string, unknown>, key: string) =>
      stack.post("/v1/responses", { model: "tiny-lm", max_output_tokens: 4, ...body }, as(key));
    const made = await create({ input: "Hi", background: true }, "k1");
    expect(made.status).toBe(200);
    const { id } = (await made.json()) as { id: string };
    expect((await get(`/v1/responses/${id}`, "k2")).status).toBe(404);
    const cancel = await fetch(stack.url(`/v1/responses/${id}/cancel`), {
      method: "POST",
      headers: as("k2"),
    });
    expect(cancel.status).toBe(404);
    for (const path of [`/v1/responses/${id}?stream=true`, `/v1/responses/${id}/input_items`])
      expect((await get(path, "k2")).status).toBe(404);
    const deleted = await fetch(stack.url(`/v1/responses/${id}`), {
      method: "DELETE",
      headers: as("k2"),
    });
    expect(deleted.status).toBe(404);
    expect((await create({ input: "And?", previous_response_id: id }, "k2")).status).toBe(404);
    expect((await get(`/v1/responses/${id}/input_items`, "k1")).status).toBe(200);
    expect((await get(`/v1/responses/${id}`, "k1")).status).toBe(200);
    expect((await get(`/v1/responses/${id}`, "root")).status).toBe(200);
  });

  it("another key gets 404 for a job's poll, events and cancel; the owner and the admin see it", async () => {
    const res = await stack.post("/v1/jobs", { model: "digits", input: { features } }, as("k1"));
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    for (const path of [`/v1/jobs/${id}`, `/v1/jobs/${id}/events`]) {
      const other = await get(path, "k2");
      expect(other.status).toBe(404);
      expect(((await other.json()) as { error: { message: string } }).error.message).toMatch(
        /not found/,
      );
    }
    const cancel = await fetch(stack.url(`/v1/jobs/${id}`), {
      method: "DELETE",
      headers: as("k2"),
    });
    expect(cancel.status).toBe(404);
    expect((await get(`/v1/jobs/${id}`, "k1")).status).toBe(200);
    expect((await get(`/v1/jobs/${id}`, "root")).status).toBe(200);
  });

  it("a streamed completion's job (X-Job-Id, the cmpl- id) is its creator's alone", async () => {
    const res = await stack.post(
      "/v1/completions",
      { model: "tiny-lm", prompt: "Q: Why?\nA:", max_tokens: 8, stream: true },
      as("k1"),
    );
    expect(res.status).toBe(200);
    const id = res.headers.get("x-job-id") ?? "";
    const text = await res.text();
    expect(text).toContain(`cmpl-${id}`);
    expect((await get(`/v1/jobs/${id}`, "k2")).status).toBe(404);
    expect((await get(`/v1/jobs/${id}/events`, "k2")).status).toBe(404);
    expect((await get(`/v1/jobs/${id}`, "k1")).status).toBe(200);
  });
});

describe("batches and stored predictions", () => {
  it("a key's batch neither overwrites nor reveals another key's stored answers", async () => {
    const mine = samples.digits.inputs[0] ?? [];
    const theirs = samples.digits.inputs[1] ?? [];
    const submit = async (key: string, f: number[]) => {
      const res = await stack.post(
        "/v1/batches",
        { model: "digits", items: [{ key: "shared-key", features: f }] },
        as(key),
      );
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    };
    const b1 = await submit("k1", mine);
    const b2 = await submit("k2", theirs);
    const done = async (id: string, key: string) => {
      for (let i = 0; i < 100; i++) {
        const s = (await (await get(`/v1/batches/${id}`, key)).json()) as { status: string };
        if (s.status === "completed") return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error("batch did not complete");
    };
    await Promise.all([done(b1, "k1"), done(b2, "k2")]);
    expect((await get(`/v1/batches/${b1}`, "k2")).status).toBe(404);
    expect((await get(`/v1/batches/${b1}/results`, "k2")).status).toBe(404);
    const read = async (key: string) =>
      (await (await get("/v1/predictions/digits/shared-key", key)).json()) as { batch: string };
    expect((await read("k1")).batch).toBe(b1);
    expect((await read("k2")).batch).toBe(b2);
  });
});

describe("prediction cache", () => {
  it("one key's cached answer is never served to, nor revealed to, another key", async () => {
    const f = (samples.digits.inputs[7] ?? []).map((v, i) => (i === 9 ? (v + 5) % 17 : v));
    const predict = async (key: string) =>
      (
        (await (
          await stack.post("/v1/models/digits/predict", { features: f }, as(key))
        ).json()) as {
          source: string;
        }
      ).source;
    expect(await predict("k1")).toBe("model");
    await new Promise((r) => setTimeout(r, 50)); // the cache is written after the answer
    expect(await predict("k1")).toBe("cache");
    expect(await predict("k2")).toBe("model");
  });
});

describe("per-key limits", () => {
  it("a key past its rate gets 429 with Retry-After; another key is unaffected", async () => {
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () => get("/v1/models", "k1", limited)),
    );
    const refused = statuses.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(4);
    expect(refused[0]?.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect((await get("/v1/models", "k2", limited)).status).toBe(200);
  });

  it("a key past its concurrency cap gets 429 while its requests are open", async () => {
    await new Promise((r) => setTimeout(r, 1_100)); // the bucket refills
    // no worker: each predict stays open until its deadline
    const open = [0, 1].map(() =>
      limited.post("/v1/models/digits/predict", { features, timeout_ms: 1_500 }, as("k2")),
    );
    await new Promise((r) => setTimeout(r, 200));
    const third = await limited.post("/v1/models/digits/predict", { features }, as("k2"));
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { message: string } }).error.message).toMatch(
      /open at once/,
    );
    expect((await Promise.all(open)).map((r) => r.status)).toEqual([504, 504]);
  });
});
