import { copyFileSync, cpSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir, tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// Two workers, each reading a repository of its own (as two nodes whose volumes differ): the
// first finds new weights it loads, the second a file it cannot load.
const loads = tempRepository({ digits: {} });
const refuses = tempDir("ferry-models-");
cpSync(loads, refuses, { recursive: true });
const stack = new Stack({
  env: { MODEL_REPOSITORY: loads, WORKER_MODELS: "digits" },
  apiEnv: { ADMIN_TOKEN: "t" },
});
beforeAll(async () => {
  await stack.start();
  await stack.startWorker({ MODEL_REPOSITORY: refuses });
});
afterAll(() => stack.stop());

const rows = samples.digits.inputs.slice(0, 4);
const infer = async () => {
  const res = await stack.post("/v2/models/digits/versions/1/infer", {
    inputs: [{ name: "input", shape: [rows.length, 64], datatype: "FP32", data: rows.flat() }],
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data;
};

describe("a reload one worker refuses", () => {
  it("is swapped in by none: the worker that loaded it keeps serving the previous files", async () => {
    const before = await infer();
    copyFileSync(join(loads, "digits/2/model.onnx"), join(loads, "digits/1/model.onnx"));
    writeFileSync(join(refuses, "digits/1/model.onnx"), "not an onnx file");
    const res = await fetch(stack.url("/admin/models/digits/reload"), {
      method: "POST",
      headers: { Authorization: "Bearer t" },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /version 1: .*(Protobuf|parse|load)/i,
    );
    // only the worker that loaded the new weights is left to answer
    const [, refusing] = stack.workers;
    refusing?.child.kill("SIGKILL");
    await refusing?.exited;
    for (let i = 0; i < 5; i++) expect(await infer()).toEqual(before);
  });

  it("is not held by a worker that died, still listed: it commits once that worker's heartbeat expires", async () => {
    const before = await infer();
    // a third worker, killed once up: listed live for up to its heartbeat's TTL (6 s), never
    // to answer; the reload waited the whole 60 s for its answer, then 60 s for its swap
    const copy = tempDir("ferry-models-");
    cpSync(loads, copy, { recursive: true });
    const dying = await stack.startWorker({ MODEL_REPOSITORY: copy });
    dying.child.kill("SIGKILL");
    await dying.exited;
    const started = performance.now();
    const res = await fetch(stack.url("/admin/models/digits/reload"), {
      method: "POST",
      headers: { Authorization: "Bearer t" },
    });
    expect(res.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(30_000);
    // the worker left serves the weights it refused to swap in alone before
    expect(await infer()).not.toEqual(before);
  }, 60_000);
});

describe("a reload asked while a worker still starts", () => {
  it("waits for that worker, which loads the new files once its start is over", async () => {
    // digits loads first (the repository's order), tiny-lm after it, for most of a second
    const repo = tempRepository({ digits: {}, "tiny-lm": {} });
    const starting = new Stack({
      env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm" },
      apiEnv: { ADMIN_TOKEN: "t" },
      workers: 0,
    });
    await starting.start();
    try {
      const inferAt = async (version: string) => {
        const res = await starting.post(`/v2/models/digits/versions/${version}/infer`, {
          inputs: [
            { name: "input", shape: [rows.length, 64], datatype: "FP32", data: rows.flat() },
          ],
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data;
      };
      const worker = starting.launchWorker({ LOG_LEVEL: "info", WORKER_PORT: "0" });
      await waitFor(
        async () => /"model":"digits","version":"1"[^\n]*"serving"/.test(worker.output.join("")),
        30_000,
        worker,
      );
      expect(worker.output.join("")).not.toMatch(/"worker ready"/);
      copyFileSync(join(repo, "digits/2/model.onnx"), join(repo, "digits/1/model.onnx"));
      const res = await fetch(starting.url("/admin/models/digits/reload"), {
        method: "POST",
        headers: { Authorization: "Bearer t" },
      });
      expect(res.status).toBe(200);
      // before, a worker was listed (and asked) only once its start was over: the reload
      // committed without it, and it went on serving the files it had loaded before the change
      expect(((await res.json()) as { workers: unknown[] }).workers).toHaveLength(1);
      expect(await inferAt("1")).toEqual(await inferAt("2"));
    } finally {
      await starting.stop();
    }
  }, 60_000);
});
