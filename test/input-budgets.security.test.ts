import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

const repo = tempRepository({ digits: {}, "tiny-lm": {} });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits,tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const message = async (res: Response) =>
  ((await res.json()) as { error: { message: string } }).error.message;
const chat = (messages: unknown[]) =>
  stack.post("/v1/chat/completions", { model: "tiny-lm", messages, max_tokens: 4 });

describe("chat messages are counted and measured before any template renders", () => {
  it("200,000 one-character messages (6.5 MB): a 400 at once, the classifier beside it unaffected", async () => {
    const many = Array.from({ length: 200_000 }, () => ({ role: "user", content: "a" }));
    const started = performance.now();
    const refused = await chat(many);
    expect(refused.status).toBe(400);
    expect(await message(refused)).toMatch(/at most 2048 messages/);
    expect(performance.now() - started).toBeLessThan(1_000);
    // eight at once do not hold a neighbour's predict for seconds
    const flood = Array.from({ length: 8 }, () => chat(many));
    const predictStarted = performance.now();
    const predict = await stack.post("/v1/models/digits/predict", {
      features: new Array(64).fill(0),
    });
    const predictMs = performance.now() - predictStarted;
    await Promise.all(flood);
    expect(predict.status).toBe(200);
    expect(predictMs).toBeLessThan(3_000);
  });

  it("text that cannot fit the context is refused before rendering; a tool message names its call", async () => {
    const long = Array.from({ length: 100 }, () => ({ role: "user", content: "x".repeat(1_000) }));
    const res = await chat(long);
    expect(res.status).toBe(400);
    expect(await message(res)).toMatch(
      /maximum context length is 256 tokens; the prompt has 100000 characters/,
    );
    const orphan = await chat([
      { role: "user", content: "weather?" },
      { role: "tool", content: "sunny" },
    ]);
    expect(orphan.status).toBe(400);
    expect(await message(orphan)).toBe(
      "messages.1.tool_call_id: a tool message needs the tool_call_id of the call it answers",
    );
  });
});

describe("Triton's binary header length is read strictly", () => {
  it("only plain digits: hex, signed or exponent forms are a 400", async () => {
    const json = JSON.stringify({
      inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: new Array(64).fill(0) }],
    });
    // (surrounding blanks are HTTP's own optional whitespace: the parser strips them)
    for (const given of [
      `0x${json.length.toString(16)}`,
      `${json.length / 10}e1`,
      `+${json.length}`,
    ]) {
      const res = await fetch(stack.url("/v2/models/digits/infer"), {
        method: "POST",
        headers: {
          "Content-Type": "application/octet-stream",
          "Inference-Header-Content-Length": given,
        },
        body: json,
      });
      expect(res.status, given).toBe(400);
    }
    const ok = await fetch(stack.url("/v2/models/digits/infer"), {
      method: "POST",
      headers: {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": String(json.length),
      },
      body: json,
    });
    expect(ok.status).toBe(200);
  });
});
