import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { readSse } from "./helpers/sse.js";
import { Stack, waitFor } from "./helpers/stack.js";

const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiEnv: { API_KEYS: "edge-key" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const key = { Authorization: "Bearer edge-key" };
const features = samples.digits.inputs[0] ?? [];
const message = async (res: Response) => {
  const body = (await res.json()) as { error: string | { message: string } };
  return typeof body.error === "string" ? body.error : body.error.message;
};
const raw = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(stack.url(path), {
    method: "POST",
    headers: { ...key, "content-type": "application/json", ...headers },
    body,
  });

describe("hostile nesting", () => {
  const deep = `${"[".repeat(100_000)}1${"]".repeat(100_000)}`;
  it("v2 data nested 100k levels deep: refused, not a stack overflow", async () => {
    const v2 = (data: string) =>
      raw(
        "/v2/models/digits/infer",
        `{"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","data":${data}}]}`,
      );
    // 100,000 lists weigh more than digits' largest body: refused before they are parsed
    const res = await v2(deep);
    expect(res.status).toBe(413);
    expect(await message(res)).toMatch(/costs more to read than its route/);
    // 2,000 weigh less, and are parsed: past the depth a tensor may have
    const shallower = await v2(`${"[".repeat(2_000)}1${"]".repeat(2_000)}`);
    expect(shallower.status).toBe(400);
    expect(await message(shallower)).toMatch(/nested deeper than 32 levels/);
  });

  it("the same inside an async job's input: 400", async () => {
    const res = await raw(
      "/v1/jobs",
      `{"model":"digits","input":{"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","data":${deep}}]}}`,
    );
    expect(res.status).toBe(400);
  });
});

describe("job event streams", () => {
  it("a classifier job's events: status, result (rendered as its poll), done, and the stream ends", async () => {
    const submitted = await stack.post("/v1/jobs", { model: "digits", input: { features } }, key);
    const { id } = (await submitted.json()) as { id: string };
    const events: Array<{ id: string; type: string; data: string }> = [];
    const res = await fetch(stack.url(`/v1/jobs/${id}/events`), { headers: key });
    await readSse(res, (e) => {
      events.push({ id: e.id ?? "", type: e.event ?? "", data: e.data });
      return undefined;
    });
    expect(events.map((e) => e.type)).toEqual(["status", "status", "result", "done"]);
    const result = JSON.parse(events[2]?.data ?? "{}") as { result: { prediction: number } };
    const poll = (await (await fetch(stack.url(`/v1/jobs/${id}`), { headers: key })).json()) as {
      result: { prediction: number };
    };
    expect(result.result.prediction).toBe(poll.result.prediction);
    for (const e of events) expect(e.id).toMatch(/^\d+-\d+$/);
  });

  it("Last-Event-ID that is not an event id: 400; one past the end of a finished job: its done, at once", async () => {
    const submitted = await stack.post("/v1/jobs", { model: "digits", input: { features } }, key);
    const { id } = (await submitted.json()) as { id: string };
    await waitFor(async () => {
      const r = await fetch(stack.url(`/v1/jobs/${id}`), { headers: key });
      return ((await r.json()) as { status: string }).status === "succeeded";
    }, 10_000);
    const garbage = await fetch(stack.url(`/v1/jobs/${id}/events`), {
      headers: { ...key, "Last-Event-ID": "garbage" },
    });
    expect(garbage.status).toBe(400);
    expect(await message(garbage)).toMatch(/Last-Event-ID/);
    const t = performance.now();
    const past = await fetch(stack.url(`/v1/jobs/${id}/events`), {
      headers: { ...key, "Last-Event-ID": `${Date.now() + 60_000}-0` },
    });
    expect(past.status).toBe(200);
    // its `done` alone: with nothing, EventSource reconnects with the same id until the log expires
    const events = (await past.text()).split("\n\n").filter(Boolean);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/^id: \d+-\d+\nevent: done\n/);
    expect(performance.now() - t).toBeLessThan(2_000);
  });
});

describe("headers", () => {
  it("X-Priority takes plain digits only", async () => {
    for (const bad of ["0x5", "0b101", "1e0", "5.0", "+5"]) {
      const res = await stack.post(
        "/v1/models/digits/predict",
        { features },
        { ...key, "X-Priority": bad },
      );
      expect(res.status, bad).toBe(400);
    }
    const ok = await stack.post(
      "/v1/models/digits/predict",
      { features },
      { ...key, "X-Priority": "7" },
    );
    expect(ok.status).toBe(200);
  });

  it("the bearer scheme is case-insensitive (RFC 7235)", async () => {
    for (const scheme of ["bearer", "BEARER", "Bearer"]) {
      const res = await fetch(stack.url("/v1/models"), {
        headers: { Authorization: `${scheme} edge-key` },
      });
      expect(res.status, scheme).toBe(200);
    }
  });

  it("X-Request-Id is echoed when it is an id (1-255 of A-Z a-z 0-9 - _ =), else replaced", async () => {
    const mine = await fetch(stack.url("/v1/models"), {
      headers: { ...key, "X-Request-Id": "trace-42_a=" },
    });
    expect(mine.headers.get("x-request-id")).toBe("trace-42_a=");
    const odd = await fetch(stack.url("/v1/models"), {
      headers: { ...key, "X-Request-Id": "has space" },
    });
    expect(odd.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("KServe v2 and OpenAI edges", () => {
  const v2 = (inputs: unknown[]) => stack.post("/v2/models/digits/infer", { inputs }, key);
  const input = { name: "input", shape: [1, 64], datatype: "FP32", data: features };

  it("two inputs with the same name: 400", async () => {
    const res = await v2([input, input]);
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(/given more than once/);
  });

  it("a value beyond FP32's range never reaches a worker: 400", async () => {
    const res = await v2([{ ...input, data: [1e300, ...features.slice(1)] }]);
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(/does not fit FP32/);
    const v1 = await stack.post(
      "/v1/models/digits/predict",
      { features: [1e39, ...features.slice(1)] },
      key,
    );
    expect(v1.status).toBe(400);
  });

  it("GET /v2: server metadata, naming the Triton extensions served", async () => {
    const res = await fetch(stack.url("/v2"), { headers: key });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      name: "ferry",
      version: "0.1.0",
      extensions: ["binary_tensor_data", "classification", "model_configuration", "statistics"],
    });
  });

  it("OpenAI fields not implemented are refused by name, not ignored", async () => {
    for (const [field, value] of [
      ["best_of", 3],
      ["suffix", "."],
      ["guided_whitespace_pattern", "[ ]?"],
      ["use_beam_search", true],
      ["skip_special_tokens", false],
      ["spaces_between_special_tokens", false],
      ["return_tokens_as_token_ids", true],
      ["length_penalty", 0.5],
      ["prompt_embeds", "AAAA"],
      ["logits_processors", ["x"]],
    ] as const) {
      const res = await stack.post(
        "/v1/completions",
        { model: "tiny-lm", prompt: "Q:", [field]: value },
        key,
      );
      expect(res.status, field).toBe(400);
      expect(await message(res)).toMatch(new RegExp(`${field}.*not supported`));
    }
    // their defaults, as vLLM's clients send them, pass (queued as a job: no tiny-lm worker here)
    const defaults = await stack.post(
      "/v1/jobs",
      {
        model: "tiny-lm",
        input: {
          prompt: "Q:",
          max_tokens: 2,
          skip_special_tokens: true,
          spaces_between_special_tokens: true,
          return_tokens_as_token_ids: false,
          length_penalty: 1,
        },
      },
      key,
    );
    expect(defaults.status).toBe(202);
    const { id } = (await defaults.json()) as { id: string };
    await fetch(stack.url(`/v1/jobs/${id}`), { method: "DELETE", headers: key });
    for (const [field, value] of [
      ["reasoning_effort", "high"],
      ["verbosity", "low"],
      ["web_search_options", {}],
    ] as const) {
      const res = await stack.post(
        "/v1/chat/completions",
        { model: "tiny-lm", messages: [{ role: "user", content: "Q" }], [field]: value },
        key,
      );
      expect(res.status, field).toBe(400);
      expect(await message(res)).toMatch(new RegExp(`${field}.*not supported`));
    }
  });
});

describe("media types", () => {
  it("a predict with no Content-Type (curl -d's form type too) is read as JSON; another type gets a 415 saying what to send", async () => {
    // bytes, not a string: fetch gives a string body a text/plain type of its own
    const predict = new TextEncoder().encode(JSON.stringify({ features }));
    for (const type of [undefined, "application/x-www-form-urlencoded"]) {
      const res = await fetch(stack.url("/v1/models/digits/predict"), {
        method: "POST",
        headers: { ...key, ...(type ? { "Content-Type": type } : {}) },
        body: predict,
      });
      expect(res.status, String(type)).toBe(200);
    }
    const res = await fetch(stack.url("/v1/chat/completions"), {
      method: "POST",
      headers: { ...key, "Content-Type": "text/plain" },
      body: JSON.stringify({ model: "tiny-lm", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(415);
    expect(await message(res)).toBe(
      "Unsupported Media Type: send the body as JSON, with Content-Type: application/json",
    );
  });
});

describe("methods", () => {
  it("a route sent the wrong method answers 405 naming the ones it takes; a path no route has, 404", async () => {
    const get = await fetch(stack.url("/v1/chat/completions"), { headers: key });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(await message(get)).toBe("/v1/chat/completions does not take GET; send POST");
    const put = await fetch(stack.url("/v1/models/digits/predict"), {
      method: "PUT",
      headers: key,
    });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("POST");
    const post = await fetch(stack.url("/health"), { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")?.split(", ").sort()).toEqual(["GET", "HEAD"]);
    expect((await fetch(stack.url("/v1/chat/complete"), { headers: key })).status).toBe(404);
    // a trailing slash is another path to Hono's router, in every method
    expect((await fetch(stack.url("/v1/chat/completions/"), { headers: key })).status).toBe(404);
    expect((await fetch(stack.url("/v1/models/digits/predict/x"), { headers: key })).status).toBe(
      404,
    );
  });
});
