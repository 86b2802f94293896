import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { samples } from "./helpers/samples.js";
import { Stack } from "./helpers/stack.js";

// one worker serves both models: a guided request must never stall the classifier beside it
const repo = tempRepository({ digits: {}, "tiny-lm": {} });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const message = async (res: Response) =>
  ((await res.json()) as { error: { message: string } }).error.message;
const complete = (extra: Record<string, unknown>) =>
  stack.post("/v1/completions", { model: "tiny-lm", prompt: "Q:", max_tokens: 40, ...extra });

/** `levels` of `$defs`, each an anyOf of two references to the one below: 1.4 KB at 20. */
function doubling(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { d0: { type: "string", maxLength: 8 } };
  for (let i = 1; i <= levels; i++)
    defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
  return { $defs: defs, $ref: `#/$defs/d${levels}` };
}

describe("guided decoding cannot stall or crash the worker", () => {
  it("the 20- and 21-level $ref schemas compile in milliseconds (references are never expanded) and answer valid JSON", async () => {
    for (const levels of [20, 21]) {
      const started = performance.now();
      const res = await complete({ guided_json: doubling(levels), temperature: 0, seed: 1 });
      expect(res.status).toBe(200);
      const text = ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]?.text;
      expect(typeof JSON.parse(text ?? "")).toBe("string");
      expect(performance.now() - started).toBeLessThan(5_000);
    }
    const health = (await (await fetch(stack.url("/health"))).json()) as {
      models: Record<string, { ready: boolean }>;
    };
    expect(health.models["tiny-lm"]?.ready).toBe(true);
  });

  it("a keyword the engine would ignore is a 400 naming it and its JSON pointer, before anything is queued", async () => {
    const started = performance.now();
    const res = await complete({
      guided_json: { type: "object", properties: { a: { type: "array", uniqueItems: true } } },
    });
    expect(res.status).toBe(400);
    expect(await message(res)).toBe(
      "guided_json: at /properties/a/uniqueItems: keyword 'uniqueItems' is not supported",
    );
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("an async job is checked the same way before it is queued, and runs the 20-level schema", async () => {
    const bad = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Q:", guided_json: { type: "object", properties: { a: { not: {} } } } },
    });
    expect(bad.status).toBe(400);
    expect(await message(bad)).toMatch(/at \/properties\/a\/not: keyword 'not' is not supported/);
    const res = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Q:", max_tokens: 40, guided_json: doubling(20) },
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    let job: { status: string; result?: { choices: Array<{ text: string }> } } = { status: "" };
    for (let i = 0; i < 100 && !["succeeded", "failed"].includes(job.status); i++) {
      await new Promise((r) => setTimeout(r, 100));
      job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as typeof job;
    }
    expect(job.status).toBe("succeeded");
    expect(typeof JSON.parse(job.result?.choices[0]?.text ?? "")).toBe("string");
  });

  it("the deepest schemas the budget takes compile, and every guided request after them is served", async () => {
    // 56 nested objects, or 32 arrays of objects, ran XGrammar off its WebAssembly stack; the
    // budget had let 64 levels through, and the grammar thread then failed every request
    const objects = (n: number): Record<string, unknown> =>
      n === 0
        ? { type: "boolean" }
        : { type: "object", properties: { a: objects(n - 1) }, required: ["a"] };
    const arraysOfObjects = (n: number): Record<string, unknown> =>
      n === 0
        ? { type: "boolean" }
        : {
            type: "array",
            minItems: 1,
            maxItems: 1,
            items: { type: "object", properties: { b: arraysOfObjects(n - 1) }, required: ["b"] },
          };
    for (const schema of [objects(32), arraysOfObjects(16)]) {
      const res = await complete({ guided_json: schema, max_tokens: 4 });
      expect(res.status, await res.clone().text()).toBe(200);
    }
    for (let k = 0; k < 3; k++) {
      const probe = await complete({ guided_json: { type: "boolean" }, max_tokens: 8, seed: k });
      expect(probe.status).toBe(200);
      const text = ((await probe.json()) as { choices: Array<{ text: string }> }).choices[0]?.text;
      expect(["true", "false"]).toContain(text);
    }
  });

  it("budgets: subschemas, depth, counts and a pattern's expansion are 400s naming the budget", async () => {
    const many = {
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 2_048 }, (_, i) => [`p${i}`, {}])),
    };
    expect(await message(await complete({ guided_json: many }))).toMatch(
      /^guided_json: at .*: the schema has more than 2048 subschemas$/,
    );
    let deep: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 33; i++) deep = { type: "array", items: deep };
    expect(await message(await complete({ guided_json: deep }))).toMatch(
      /the schema nests deeper than 32 levels/,
    );
    expect(
      await message(await complete({ guided_json: { type: "string", maxLength: 1_000_000 } })),
    ).toBe("guided_json: at /maxLength: maxLength 1000000 is more than 10000");
    expect(await message(await complete({ guided_regex: "(?:(?:a{100}){100}){100}" }))).toMatch(
      /writes out to 1000000 characters/,
    );
  });

  it("a guided regex with ~49,000 written-out states runs on the grammar thread: the classifier beside it answers as fast as before", async () => {
    const predict = async () => {
      const started = performance.now();
      const res = await stack.post("/v1/models/digits/predict", {
        features: samples.digits.inputs[0],
      });
      expect(res.status).toBe(200);
      return performance.now() - started;
    };
    const p99 = async () => {
      const times: number[] = [];
      for (let i = 0; i < 20; i++) times.push(await predict());
      return times.sort((a, b) => a - b)[18] ?? 0;
    };
    const before = await p99();
    const hostile = Array.from({ length: 4 }, (_, k) =>
      complete({ guided_regex: "(?:(?:a?){49}){1000}", max_tokens: 60, seed: k, temperature: 1 }),
    );
    const during = await p99();
    for (const res of await Promise.all(hostile)) expect(res.status).toBe(200);
    expect(during).toBeLessThan(2 * before + 50);
  });

  it("allowed_token_ids: past any vocabulary's size is a 400; a long repetitive list is one mask per sequence, not a list read per token", async () => {
    const tooMany = Array.from({ length: 262_145 }, (_, i) => i % 200);
    expect(await message(await complete({ allowed_token_ids: tooMany }))).toMatch(
      /^allowed_token_ids: a list of at most 262144 elements; this one has 262145/,
    );
    const started = performance.now();
    const repeated = Array.from({ length: 262_144 }, (_, i) => 97 + (i % 26));
    const res = await complete({ allowed_token_ids: repeated, max_tokens: 20, ignore_eos: true });
    expect(res.status).toBe(200);
    const text = ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]?.text;
    expect(text).toMatch(/^[a-z]{20}$/);
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});

describe("one model's costly grammars do not hold another's", () => {
  // two generators on one worker: tiny-lm, and a copy of it under another name
  const twoRepo = tempRepository({ "tiny-lm": {} });
  cpSync(join(twoRepo, "tiny-lm"), join(twoRepo, "tiny-lm-b"), { recursive: true });
  const config = join(twoRepo, "tiny-lm-b", "model.json");
  writeFileSync(
    config,
    JSON.stringify({ ...JSON.parse(readFileSync(config, "utf8")), name: "tiny-lm-b" }),
  );
  const two = new Stack({ env: { MODEL_REPOSITORY: twoRepo, WORKER_MODELS: "tiny-lm,tiny-lm-b" } });
  beforeAll(() => two.start());
  afterAll(() => two.stop());

  it("a model's guided request is answered while another model's grammars, each within its budget, compile one after another", async () => {
    // 256 choices of 1,024 characters: about a second each to compile, distinct (no cache)
    const choices = (k: number) =>
      Array.from({ length: 256 }, (_, i) => `${k}-${i}-`.padEnd(1_024, "abcdefgh"[(i + k) % 8]));
    const finished: string[] = [];
    const heavy = [1, 2, 3].map(async (k) => {
      const res = await two.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Q:",
        max_tokens: 2,
        guided_choice: choices(k),
      });
      await res.text();
      finished.push(`heavy ${k}`);
      return res.status;
    });
    await new Promise((r) => setTimeout(r, 200));
    const light = await two.post("/v1/completions", {
      model: "tiny-lm-b",
      prompt: "Q:",
      max_tokens: 4,
      guided_choice: ["yes", "no"],
    });
    expect(light.status).toBe(200);
    finished.push("light");
    // on a grammar thread the worker's models shared, it waited for all three
    expect(await Promise.all(heavy)).toEqual([200, 200, 200]);
    expect(finished.indexOf("light")).toBeLessThan(2);
  });

  it("a guided request's deadline holds while its grammar waits its turn behind its own model's", async () => {
    const choices = (k: number) =>
      Array.from({ length: 256 }, (_, i) => `${k}-${i}-`.padEnd(1_024, "stuvwxyz"[(i + k) % 8]));
    const heavy = [4, 5, 6, 7, 8].map((k) =>
      two.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Q:",
        max_tokens: 2,
        guided_choice: choices(k),
      }),
    );
    await new Promise((r) => setTimeout(r, 200));
    const started = performance.now();
    const late = await two.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Q:",
      max_tokens: 4,
      guided_regex: "[a-z]{3}",
      timeout_ms: 500,
    });
    // answered at its deadline, not once the five grammars before it had compiled
    expect(late.status).toBe(504);
    expect(performance.now() - started).toBeLessThan(1_500);
    for (const res of await Promise.all(heavy)) expect(res.status).toBe(200);
  });
});

describe("keys take turns on a model's grammar thread", () => {
  const keyed = new Stack({
    env: { WORKER_MODELS: "tiny-lm" },
    apiEnv: { API_KEYS: "k1,k2" },
  });
  beforeAll(() => keyed.start());
  afterAll(() => keyed.stop());

  it("another key's guided request compiles next, not after every grammar one key queued before it", async () => {
    // 256 choices of 1,024 characters: about a second each to compile, distinct (no cache)
    const choices = (k: number) =>
      Array.from({ length: 256 }, (_, i) => `${k}-${i}-`.padEnd(1_024, "ijklmnop"[(i + k) % 8]));
    const complete = (key: string, body: Record<string, unknown>) =>
      keyed.post(
        "/v1/completions",
        { model: "tiny-lm", prompt: "Q:", max_tokens: 2, ...body },
        { authorization: `Bearer ${key}` },
      );
    const finished: string[] = [];
    const heavy = [1, 2, 3].map(async (k) => {
      const res = await complete("k1", { guided_choice: choices(k) });
      await res.text();
      finished.push(`heavy ${k}`);
      return res.status;
    });
    await new Promise((r) => setTimeout(r, 200));
    const light = await complete("k2", { guided_choice: ["yes", "no"] });
    expect(light.status).toBe(200);
    finished.push("light");
    expect(await Promise.all(heavy)).toEqual([200, 200, 200]);
    // in one line it waited for all three of k1's
    expect(finished.indexOf("light")).toBeLessThan(2);
  });
});
