import { copyFileSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// digits as shipped; a copy of it whose model.json names an input its graph lacks; tiny-lm
// with twice the KV heads its graph has
const tinyLm = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
  architecture: Record<string, unknown>;
};
const repo = tempRepository({
  digits: {},
  "tiny-lm": { architecture: { ...tinyLm.architecture, n_head: 8 } },
});
cpSync("models/digits", join(repo, "digits-wrong"), { recursive: true });
const wrongConfig = join(repo, "digits-wrong/model.json");
const goodConfig = readFileSync(wrongConfig, "utf8").replace(
  '"name": "digits"',
  '"name": "digits-wrong"',
);
writeFileSync(wrongConfig, goodConfig.replace('"name": "input"', '"name": "pixels"'));

const stack = new Stack({ env: { MODEL_REPOSITORY: repo }, apiEnv: { ADMIN_TOKEN: "t" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const reload = (model: string) =>
  fetch(stack.url(`/admin/models/${model}/reload`), {
    method: "POST",
    headers: { Authorization: "Bearer t" },
  });
const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { message: string } }).error.message;
const health = async () =>
  (
    (await (await fetch(stack.url("/health"))).json()) as {
      models: Record<string, { ready: boolean }>;
    }
  ).models;
const rows = samples.digits.inputs.slice(0, 4);
const infer = async (model: string, version: string) => {
  const res = await stack.post(`/v2/models/${model}/versions/${version}/infer`, {
    inputs: [{ name: "input", shape: [rows.length, 64], datatype: "FP32", data: rows.flat() }],
  });
  const body = (await res.json()) as { outputs?: Array<{ data: number[] }> };
  return { status: res.status, logits: body.outputs?.[0]?.data };
};
const workerLog = () => stack.workers.map((w) => w.output.join("")).join("");

describe("a model.json that does not match its graph", () => {
  it("at the worker's start: refused with one line, never ready, while the other models serve", async () => {
    expect(workerLog()).toContain(
      "model.json input 'pixels' is not in digits-wrong/1/model.onnx (its inputs: 'input' float32[-1,64])",
    );
    expect(workerLog()).toContain(
      "tiny-lm/1/model.onnx input 'past_key_values.0.key' float32[-1,4,-1,32] has 4 KV heads, but architecture.n_kv_head (else n_head) says 8",
    );
    const models = await health();
    expect(models.digits?.ready).toBe(true);
    expect(models["digits-wrong"]?.ready).toBe(false);
    expect(models["tiny-lm"]?.ready).toBe(false);
    expect((await fetch(stack.url("/v2/models/digits-wrong/ready"))).status).not.toBe(200);
    // before, it served, and every request failed with ONNX Runtime's 500
    const refused = await stack.post(
      "/v1/models/digits-wrong/predict",
      { features: rows[0] },
      { "X-Timeout-Ms": "500" },
    );
    expect(refused.status).toBe(504);
    expect((await stack.post("/v1/models/digits/predict", { features: rows[0] })).status).toBe(200);
  });

  it("at a reload: a version whose graph is another model's is refused with its line, and the old versions keep answering", async () => {
    const before = await infer("digits", "2");
    expect(before.status).toBe(200);
    mkdirSync(join(repo, "digits/3"));
    copyFileSync("models/mnist/1/model.onnx", join(repo, "digits/3/model.onnx"));
    try {
      const res = await reload("digits");
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toMatch(
        /version 3: model\.json input 'input' has dims \[64\], but digits\/3\/model\.onnx has 'input' float32\[-1,\d+\]$/,
      );
      const versions = (
        (await (await fetch(stack.url("/v2/models/digits"))).json()) as { versions: string[] }
      ).versions;
      expect(versions).not.toContain("3");
      const after = await infer("digits", "2");
      expect(after).toEqual(before);
    } finally {
      rmSync(join(repo, "digits/3"), { recursive: true });
    }
  });

  it("at a reload: a model.json edited to name another input is refused, and the old one keeps answering", async () => {
    const path = join(repo, "digits/model.json");
    const config = readFileSync(path, "utf8");
    const before = await infer("digits", "1");
    writeFileSync(path, config.replace('"name": "input"', '"name": "pixels"'));
    try {
      const res = await reload("digits");
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toContain(
        "version 1: model.json input 'pixels' is not in digits/1/model.onnx (its inputs: 'input' float32[-1,64])",
      );
      expect(await infer("digits", "1")).toEqual(before);
      expect((await health()).digits?.ready).toBe(true);
    } finally {
      writeFileSync(path, config);
    }
  });

  it("a model refused at the start serves once its model.json is fixed and it is reloaded", async () => {
    writeFileSync(wrongConfig, goodConfig);
    const res = await reload("digits-wrong");
    expect(res.status).toBe(200);
    expect((await health())["digits-wrong"]?.ready).toBe(true);
    expect(await infer("digits-wrong", "2")).toEqual(await infer("digits", "2"));
  });
});
