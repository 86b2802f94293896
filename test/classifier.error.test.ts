import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

const stack = new Stack({ apiEnv: { MAX_BODY_BYTES: "65536" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const features = samples.digits.inputs[0] ?? [];

async function expectError(
  res: Response,
  status: number,
  message: RegExp,
  shape: "openai" | "kserve" = "openai",
) {
  expect(res.status).toBe(status);
  const body = (await res.json()) as { error: unknown };
  const text = shape === "kserve" ? body.error : (body.error as { message: string }).message;
  expect(typeof text).toBe("string");
  expect(text as string).toMatch(message);
  if (shape === "openai")
    expect(body.error).toMatchObject({ type: expect.any(String), code: expect.any(String) });
}

describe("bad input gets a 4xx that names the problem, and never reaches a worker", () => {
  it("wrong feature count", async () => {
    await expectError(
      await stack.post("/v1/models/digits/predict", { features: [1, 2, 3] }),
      400,
      /^Expected 64 features, got 3$/,
    );
  });

  it("missing or mistyped fields", async () => {
    await expectError(await stack.post("/v1/models/digits/predict", {}), 400, /features/);
    await expectError(
      await stack.post("/v1/models/digits/predict", { features: ["a", ...features.slice(1)] }),
      400,
      /features/,
    );
  });

  it("bad JSON, including a bare NaN", async () => {
    const bad = (body: string) =>
      fetch(stack.url("/v1/models/digits/predict"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    await expectError(await bad("{not json"), 400, /Malformed JSON/);
    await expectError(await bad(`{"features":[NaN${",0".repeat(63)}]}`), 400, /Malformed JSON/);
  });

  it("v2: wrong datatype, wrong shape, value count, NaN, unknown input and output, in KServe's shape", async () => {
    const infer = (input: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      stack.post("/v2/models/digits/infer", {
        inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features, ...input }],
        ...extra,
      });
    await expectError(
      await infer({ datatype: "INT64" }),
      400,
      /datatype INT64, expected FP32/,
      "kserve",
    );
    await expectError(
      await infer({ shape: [1, 63] }),
      400,
      /shape \[1,63\], expected \[-1,64\]/,
      "kserve",
    );
    await expectError(
      await infer({ shape: [2, 64] }),
      400,
      /64 values, shape \[2,64\] needs 128/,
      "kserve",
    );
    await expectError(
      await infer({ data: ["NaN", ...features.slice(1)] }),
      400,
      /"NaN", not a finite number/,
      "kserve",
    );
    await expectError(await infer({ name: "pixels" }), 400, /missing input 'input'/, "kserve");
    await expectError(
      await infer({}, { outputs: [{ name: "probs" }] }),
      400,
      /unknown output 'probs'/,
      "kserve",
    );
    // each output is rendered in full: 100,000 of one name had been a 500 after 11 s
    await expectError(
      await infer({}, { outputs: Array(3).fill({ name: "logits" }) }),
      400,
      /output 'logits' is asked for more than once/,
      "kserve",
    );
    await expectError(
      await infer({}, { outputs: Array(65).fill({ name: "logits" }) }),
      400,
      /outputs: .*64/i,
      "kserve",
    );
  });

  it("unknown model or version: 404", async () => {
    await expectError(
      await stack.post("/v1/models/nope/predict", { features }),
      404,
      /Model 'nope' not found/,
    );
    const v2 = await stack.post("/v2/models/digits/versions/9/infer", {
      inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }],
    });
    await expectError(v2, 404, /no version '9'/, "kserve");
    await expectError(
      await stack.post("/v1/jobs", { model: "nope", input: { features } }),
      404,
      /not found/,
    );
    await expectError(await fetch(stack.url("/v1/jobs/does-not-exist")), 404, /not found/);
  });

  it("a body over the limit: 413", async () => {
    const big = { features: Array.from({ length: 20_000 }, () => 1.2345) };
    await expectError(
      await stack.post("/v1/models/digits/predict", big),
      413,
      /exceeds 65536 bytes/,
    );
  });

  it("none of those reached a worker", async () => {
    const metrics = await (await fetch(stack.url("/metrics"))).text();
    expect(metrics).not.toMatch(/ferry_inference_requests_total\{[^}]*\} [1-9]/);
  });
});
