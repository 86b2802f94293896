import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "./helpers/stack.js";
import { statsAcross } from "./helpers/triton-stats.js";

// tiny-lm, and digits (a classifier) for a v2 inference
const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm,digits" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
const prompt = "Once upon a time";

/** The greedy completion of `prompt`, as the OpenAI route answers it. */
async function greedy(maxTokens: number, stop?: string[]) {
  const res = await openai().completions.create({
    model: "tiny-lm",
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    ...(stop ? { stop } : {}),
  });
  return res.choices[0]?.text ?? "";
}

async function generate(body: Record<string, unknown>, model = "tiny-lm") {
  const res = await stack.post(`/v2/models/${model}/generate`, body);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("Triton's generate extension", () => {
  it("text_input in, text_output out: the greedy completion, after its input unless exclude_input_in_output", async () => {
    const expected = await greedy(12);
    expect(expected.length).toBeGreaterThan(0);
    // the vLLM backend's form: the settings in `parameters`
    const own = await generate({
      text_input: prompt,
      parameters: { max_tokens: 12, temperature: 0, exclude_input_in_output: true },
    });
    expect(own).toEqual({
      status: 200,
      body: { model_name: "tiny-lm", model_version: "1", text_output: expected },
    });
    // TensorRT-LLM's ensemble form (settings beside the text, empty word lists as LiteLLM
    // sends them), an id echoed, the input before the text by default
    const beside = await generate({
      id: "req-7",
      text_input: prompt,
      max_tokens: 12,
      temperature: 0,
      bad_words: [""],
      stop_words: [""],
    });
    expect(beside).toEqual({
      status: 200,
      body: {
        id: "req-7",
        model_name: "tiny-lm",
        model_version: "1",
        text_output: prompt + expected,
      },
    });
    // a null among the parameters says nothing: it had wiped out the setting beside the text
    // (16 tokens, the default, for the 12 asked)
    const both = await generate({
      text_input: prompt,
      max_tokens: 12,
      parameters: { max_tokens: null, temperature: 0, exclude_input_in_output: true },
    });
    expect(both.body.text_output).toBe(expected);
  });

  it("stop_words end the text where the completion's stop does; bad_words are never written", async () => {
    const whole = await greedy(16);
    const word = whole.trim().split(/\s+/)[1];
    if (!word) throw new Error(`expected a second word in ${JSON.stringify(whole)}`);
    const stopped = await generate({
      text_input: prompt,
      parameters: {
        max_tokens: 16,
        temperature: 0,
        stop_words: [word],
        exclude_input_in_output: true,
      },
    });
    expect(stopped.body.text_output).toBe(await greedy(16, [word]));
    expect(stopped.body.text_output).not.toContain(word);
    const banned = await generate({
      text_input: prompt,
      parameters: {
        max_tokens: 16,
        temperature: 0,
        bad_words: [word],
        exclude_input_in_output: true,
      },
    });
    expect(banned.status).toBe(200);
    expect(banned.body.text_output).not.toBe(whole);
  });

  it("generate_stream: SSE data pieces of the same object, their text joined /generate's", async () => {
    const body = {
      id: "s-1",
      text_input: prompt,
      parameters: { max_tokens: 12, temperature: 0 },
    };
    const whole = await generate(body);
    const res = await stack.post("/v2/models/tiny-lm/generate_stream", body);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const pieces: Array<Record<string, unknown>> = [];
    const parser = createParser({ onEvent: (e) => pieces.push(JSON.parse(e.data)) });
    parser.feed(await res.text());
    expect(pieces.length).toBeGreaterThan(2);
    for (const piece of pieces)
      expect(piece).toMatchObject({ id: "s-1", model_name: "tiny-lm", model_version: "1" });
    expect(pieces.map((p) => p.text_output).join("")).toBe(whole.body.text_output);
  });

  it("refuses, in KServe's error shape, a setting it lacks, a classifier and an unknown model", async () => {
    const beam = await generate({ text_input: prompt, parameters: { beam_width: 2 } });
    expect(beam.status).toBe(400);
    expect(beam.body.error).toMatch(/unexpected generate setting 'beam_width'/);
    const typed = await generate({ text_input: prompt, max_tokens: "many" });
    expect(typed.status).toBe(400);
    expect(typed.body.error).toMatch(/^max_tokens: /);
    const classifier = await generate({ text_input: prompt }, "digits");
    expect(classifier.status).toBe(400);
    expect(classifier.body.error).toMatch(/is a classifier/);
    expect((await generate({ text_input: prompt }, "nope")).status).toBe(404);
    const stream = await stack.post("/v2/models/tiny-lm/generate_stream", {
      text_input: prompt,
      parameters: { beam_width: 2 },
    });
    expect(stream.status).toBe(400);
  });
});

describe("a KServe v2 body with no media type, as Triton's curl examples send it", () => {
  it("is read as JSON on /generate and /infer (curl's form type too); another declared type is refused", async () => {
    const send = (path: string, body: unknown, type?: string) =>
      fetch(stack.url(path), {
        method: "POST",
        // a Blob without a type: fetch sends no Content-Type at all
        body: type ? JSON.stringify(body) : new Blob([JSON.stringify(body)]),
        ...(type ? { headers: { "Content-Type": type } } : {}),
      });
    const generateBody = { text_input: prompt, parameters: { max_tokens: 4, temperature: 0 } };
    const typed = await generate(generateBody);
    for (const type of [undefined, "application/x-www-form-urlencoded"]) {
      const res = await send("/v2/models/tiny-lm/generate", generateBody, type);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(typed.body);
    }
    const infer = {
      inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: new Array(64).fill(1) }],
    };
    const untyped = await send("/v2/models/digits/infer", infer);
    expect(untyped.status).toBe(200);
    expect(await untyped.json()).toMatchObject({
      model_name: "digits",
      outputs: [{ name: "logits" }],
    });
    const xml = await send("/v2/models/tiny-lm/generate", generateBody, "text/xml");
    expect(xml.status).not.toBe(200);
  });
});

describe("Triton's statistics for a text model", () => {
  it("each completion a request and a computed row, each decode step or prefill an execution", async () => {
    const body = { text_input: prompt, parameters: { max_tokens: 6, temperature: 0 } };
    // a classifier's statistics come from the API; a text model's from the worker, each second
    const { before, after, added, time, runs } = await statsAcross(stack, "tiny-lm", "1", 3, () =>
      Promise.all([1, 2, 3].map(() => generate(body))),
    );
    expect(after.inference_count - before.inference_count).toBe(3);
    expect(added("success")).toBe(3);
    expect(added("fail")).toBe(0);
    expect(added("queue")).toBe(3);
    // at least a prefill and the decode steps of 6 tokens, some over several sequences at once
    expect(after.execution_count - before.execution_count).toBe(runs);
    expect(after.execution_count - before.execution_count).toBeGreaterThanOrEqual(6);
    expect(time("success")).toBeGreaterThan(0);
  });
});
