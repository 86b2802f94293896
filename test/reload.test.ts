import {
  copyFileSync,
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { createRedis, InferenceClient, Keys } from "@ferry/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { argmax, referenceLogits, samples } from "./helpers/samples.js";
import { REDIS_URL, Stack, waitFor } from "./helpers/stack.js";

const repo = tempRepository({
  digits: { cache: { enabled: true, ttl_s: 3600, max_entries: 1000 } },
  mnist: {},
});
const stack = new Stack({
  // every model of the repository, as `npm start` serves it: a model added later included
  env: { MODEL_REPOSITORY: repo },
  apiEnv: { ADMIN_TOKEN: "t" },
});
/** A second API replica: the reload is sent to the first, as a Service would send it. */
let replica = "";
beforeAll(async () => {
  await stack.start();
  replica = (await stack.startApiReplica()).url;
});
afterAll(() => stack.stop());

const versionsOf = async (base: string, model: string) =>
  ((await (await fetch(`${base}/v2/models/${model}`)).json()) as { versions: string[] }).versions;

const rows = samples.digits.inputs.slice(0, 4);
const reload = () =>
  fetch(stack.url("/admin/models/digits/reload"), {
    method: "POST",
    headers: { Authorization: "Bearer t" },
  });
const infer = async (version: string) => {
  const res = await stack.post(`/v2/models/digits/versions/${version}/infer`, {
    inputs: [{ name: "input", shape: [rows.length, 64], datatype: "FP32", data: rows.flat() }],
  });
  return {
    status: res.status,
    body: (await res.json()) as { outputs?: Array<{ data: number[] }> },
  };
};

/** Predicts in a loop until stopped; every answer must be a 200. */
function load() {
  let running = true;
  const statuses: number[] = [];
  const done = (async () => {
    while (running) {
      const res = await stack.post("/v1/models/digits/predict", {
        features: rows[statuses.length % rows.length],
      });
      statuses.push(res.status);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return statuses;
    },
  };
}

describe("hot reload", () => {
  it("swaps changed files and new versions in under load, dropping nothing", async () => {
    const traffic = [load(), load(), load()];
    // version 2 gets version 1's weights; version 3 appears
    copyFileSync(join(repo, "digits/1/model.onnx"), join(repo, "digits/2/model.onnx"));
    mkdirSync(join(repo, "digits/3"));
    copyFileSync(join(repo, "digits/1/model.onnx"), join(repo, "digits/3/model.onnx"));
    const res = await reload();
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      versions: string[];
      workers: Array<{ loaded: string[]; unchanged: string[] }>;
    };
    expect(body.versions).toEqual(["1", "2", "3"]);
    expect(body.workers[0]?.loaded.sort()).toEqual(["2", "3"]);
    expect(body.workers[0]?.unchanged).toEqual(["1"]);
    await new Promise((r) => setTimeout(r, 300));
    const statuses = (await Promise.all(traffic.map((t) => t.stop()))).flat();
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    const v1 = (await referenceLogits("digits", "1", rows)).flat();
    // no answer cached from the replaced files is served: version 2 answers as version 1 now
    const fresh = await stack.post("/v1/models/digits/predict", { features: rows[0] });
    const answer = (await fresh.json()) as { prediction: number; confidence: number };
    expect(answer.prediction).toBe(argmax(v1.slice(0, 10)));
    // the probability tells the two networks apart even where they agree on the class
    const logits = v1.slice(0, 10);
    const top = Math.max(...logits);
    const probability = 1 / logits.reduce((sum, l) => sum + Math.exp(l - top), 0);
    expect(answer.confidence).toBeCloseTo(probability, 5);
    for (const version of ["2", "3"]) {
      const { status, body: out } = await infer(version);
      expect(status).toBe(200);
      for (const [k, x] of (out.outputs?.[0]?.data ?? []).entries())
        expect(x).toBeCloseTo(v1[k] ?? 0, 4);
    }
    // the other replica follows the reload it did not run: version 3 is listed and served there
    await waitFor(async () => (await versionsOf(replica, "digits")).includes("3"), 5_000);
    const there = await fetch(`${replica}/v2/models/digits/versions/3/infer`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: rows[0] }],
      }),
    });
    expect(there.status).toBe(200);
  });

  it("reloads the one model named: another model's new or half-edited files are neither taken nor an error", async () => {
    // mnist (no worker reloads it) gains a version 3 and, mid-edit, a model.json that is no JSON
    mkdirSync(join(repo, "mnist/3"));
    copyFileSync(join(repo, "mnist/1/model.onnx"), join(repo, "mnist/3/model.onnx"));
    const config = readFileSync(join(repo, "mnist/model.json"), "utf8");
    writeFileSync(join(repo, "mnist/model.json"), config.slice(0, 40));
    try {
      const res = await reload();
      expect(res.status).toBe(200);
    } finally {
      writeFileSync(join(repo, "mnist/model.json"), config);
    }
    // and once mnist's config is whole again, a reload of digits still leaves it as it was
    expect((await reload()).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    for (const base of [stack.baseUrl, replica])
      expect(await versionsOf(base, "mnist")).toEqual(["1"]);
  });

  it("serves a model added to the repository once it is reloaded by name, on every replica", async () => {
    cpSync(join(repo, "mnist"), join(repo, "mnist-b"), { recursive: true });
    const path = join(repo, "mnist-b/model.json");
    writeFileSync(path, readFileSync(path, "utf8").replace('"name": "mnist"', '"name": "mnist-b"'));
    const predict = (base: string) =>
      fetch(`${base}/v1/models/mnist-b/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ features: samples.mnist.inputs[0] }),
      });
    expect((await predict(stack.baseUrl)).status).toBe(404);
    const res = await fetch(stack.url("/admin/models/mnist-b/reload"), {
      method: "POST",
      headers: { Authorization: "Bearer t" },
    });
    expect(res.status).toBe(200);
    // the copy holds mnist's versions as the earlier test left them: 1, and 3
    const { workers } = (await res.json()) as {
      workers: Array<{ loaded: string[]; failed: unknown[] }>;
    };
    expect(workers.map((w) => [w.loaded, w.failed])).toEqual([[["1", "3"], []]]);
    await waitFor(async () => (await predict(replica)).status === 200, 5_000);
    const expected = argmax(
      (await referenceLogits("mnist", "1", [samples.mnist.inputs[0] ?? []])).flat(),
    );
    for (const base of [stack.baseUrl, replica]) {
      const answer = (await (await predict(base)).json()) as { prediction: number };
      expect(answer.prediction).toBe(expected);
    }
  });

  it("Triton's load does the same, with the body tritonclient sends; its unload and overrides are refused by name", async () => {
    cpSync(join(repo, "mnist"), join(repo, "mnist-c"), { recursive: true });
    const path = join(repo, "mnist-c/model.json");
    writeFileSync(path, readFileSync(path, "utf8").replace('"name": "mnist"', '"name": "mnist-c"'));
    // tritonclient's load_model: "{}" (or the overrides) and no Content-Type
    const post = (action: string, body: string, token = "t", model = "mnist-c") =>
      fetch(stack.url(`/v2/repository/models/${model}/${action}`), {
        method: "POST",
        headers: token ? { Authorization: `Bearer ${token}` } : {},
        body,
      });
    expect((await post("load", "{}", "")).status).toBe(401);
    const override = await post("load", JSON.stringify({ parameters: { config: "{}" } }));
    expect(override.status).toBe(400);
    expect(((await override.json()) as { error: string }).error).toMatch(/'config' is not served/);
    const unknown = await post("load", "{}", "t", "no-such-model");
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: expect.stringMatching(/no-such-model/) });

    const loaded = await post("load", "{}");
    expect(loaded.status).toBe(200);
    expect(await loaded.text()).toBe("");
    const ready = await fetch(stack.url("/v2/models/mnist-c/ready"));
    expect(ready.status).toBe(200);
    const index = (await (
      await fetch(stack.url("/v2/repository/index"), { method: "POST" })
    ).json()) as Array<{
      name: string;
      state: string;
    }>;
    expect(index.filter((m) => m.name === "mnist-c").map((m) => m.state)).toContain("READY");

    const unload = await post("unload", "{}");
    expect(unload.status).toBe(400);
    expect(((await unload.json()) as { error: string }).error).toMatch(
      /unload is not served.*WORKER_MODELS/,
    );
    expect((await fetch(stack.url("/v2/models/mnist-c/ready"))).status).toBe(200);
  });

  it("swaps nothing of a reload that is refused: a version that loaded keeps its old files too", async () => {
    const before = await infer("3"); // version 1's weights since the first test
    // version 3 gets new weights (the shipped version 2's) and a broken version 4 appears
    copyFileSync(join("models/digits/2/model.onnx"), join(repo, "digits/3/model.onnx"));
    mkdirSync(join(repo, "digits/4"));
    writeFileSync(join(repo, "digits/4/model.onnx"), "not an onnx file");
    try {
      const res = await reload();
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
        /version 4/,
      );
      const after = await infer("3");
      expect(after.status).toBe(200);
      expect(after.body.outputs?.[0]?.data).toEqual(before.body.outputs?.[0]?.data);
    } finally {
      rmSync(join(repo, "digits/4"), { recursive: true });
      copyFileSync(join(repo, "digits/1/model.onnx"), join(repo, "digits/3/model.onnx"));
    }
  });

  it("refuses a broken .onnx with a clear error, and the old files keep serving", async () => {
    const before = await infer("2");
    writeFileSync(join(repo, "digits/2/model.onnx"), "not an onnx file");
    const res = await reload();
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /version 2: .*(Protobuf|parse|load)/i,
    );
    const after = await infer("2");
    expect(after.status).toBe(200);
    expect(after.body.outputs?.[0]?.data).toEqual(before.body.outputs?.[0]?.data);
  });

  it("a refused new version is neither listed nor made the default", async () => {
    mkdirSync(join(repo, "digits/9"), { recursive: true });
    writeFileSync(join(repo, "digits/9/model.onnx"), "not an onnx file either");
    const res = await reload();
    expect(res.status).toBe(400);
    const model = (await (await fetch(stack.url("/v2/models/digits"))).json()) as {
      versions: string[];
    };
    expect(model.versions).not.toContain("9");
    const res2 = await stack.post("/v1/models/digits/predict", {
      features: samples.digits.inputs[0],
    });
    expect(res2.status).toBe(200);
  });

  it("a reload whose API died after the commit, before the generation moved: no replica answers from the replaced files' cache, and another finishes it", async () => {
    // a known start: the tests before left files on disk that no worker serves (refused ones)
    rmSync(join(repo, "digits/9"), { recursive: true, force: true });
    const shipped = (v: string) => readFileSync(join("models/digits", v, "model.onnx"));
    for (const v of readdirSync(join(repo, "digits")).filter((d) => /^\d+$/.test(d)))
      writeFileSync(join(repo, "digits", v, "model.onnx"), shipped("2"));
    expect((await reload()).status).toBe(200);
    const features = samples.digits.inputs[7];
    const predict = async () =>
      (await (await stack.post("/v1/models/digits/predict", { features })).json()) as {
        model_version: string;
        source: string;
        scores: number[];
      };
    const first = await predict();
    expect(first.source).toBe("model");
    expect((await predict()).source).toBe("cache");
    const version = first.model_version;
    const file = join(repo, "digits", version, "model.onnx");
    writeFileSync(file, shipped("1"));

    // an API that commits the reload (every worker swaps) and dies before moving the generation
    const dying = new InferenceClient({ redisUrl: REDIS_URL, prefix: stack.prefix });
    await dying.ready();
    const live = async () => (await dying.workers.live()).map((w) => w.id);
    const { answers, decide } = await dying.control.requestReload("digits", live);
    expect(answers.flatMap((a) => a.failed)).toEqual([]);
    await decide(true);
    await dying.close();
    // every replica heard the commit: until the generation moves, the model answers, not the
    // cache of the files it replaced (before, the old answer, for the cache's TTL)
    const during = await predict();
    expect(during.source).toBe("model");
    expect(during.scores).not.toEqual(first.scores);
    // a replica that starts now learns of the commit from Redis
    const late = await stack.startApiReplica();
    const fromLate = (await (
      await fetch(`${late.url}/v1/models/digits/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ features }),
      })
    ).json()) as { source: string; scores: number[] };
    expect(fromLate).toMatchObject({ source: "model", scores: during.scores });

    // as it stands after the longest a commit may wait for the workers' swaps (120 s here)
    const redis = createRedis(REDIS_URL);
    try {
      const keys = new Keys(stack.prefix);
      const generation = Number(await redis.get(keys.generation("digits")));
      expect(await redis.get(keys.reloadCommit("digits"))).not.toBeNull();
      await redis.set(keys.reloadCommit("digits"), String(Date.now() - 130_000));
      // a replica's sweep moves the generation (before, nothing did), once
      await waitFor(
        async () => Number(await redis.get(keys.generation("digits"))) === generation + 1,
        15_000,
      );
      expect(await redis.get(keys.reloadCommit("digits"))).toBeNull();
    } finally {
      redis.disconnect();
    }
    // and the cache answers again, with the new files' answers
    await predict();
    await waitFor(async () => (await predict()).source === "cache", 5_000);
    const computed = await predict();
    expect(computed.scores).not.toEqual(first.scores);
    // and the answer is the new files' own
    const raw = await stack.post(`/v2/models/digits/versions/${version}/infer`, {
      inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: features }],
    });
    const logits = ((await raw.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data;
    const expected = softmax(logits ?? []);
    for (const [i, p] of computed.scores.entries()) expect(p).toBeCloseTo(expected[i] ?? NaN, 6);
  }, 60_000);
});

function softmax(logits: number[]): number[] {
  const max = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((v) => v / sum);
}
