import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeBosTokenizer } from "./helpers/byte-level-tokenizer.js";
import { tempRepository } from "./helpers/model-repo.js";
import { referenceGreedy } from "./helpers/reference-lm.js";
import { Stack } from "./helpers/stack.js";

// tiny-lm (the one text model, served) and bert-fortunes (an embedder) beside mnist (a
// classifier, not served)
const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm,bert-fortunes" } });
// tiny-lm read by a Hugging Face tokenizer.json whose post-processor adds a BOS (id 256)
const bosRepo = tempRepository({
  "tiny-lm": { tokenizer: { type: "huggingface", eos_token_id: 256 } },
});
writeBosTokenizer(join(bosRepo, "tiny-lm"));
const bos = new Stack({ env: { MODEL_REPOSITORY: bosRepo, WORKER_MODELS: "tiny-lm" } });
beforeAll(() => Promise.all([stack.start(), bos.start()]));
afterAll(() => Promise.all([stack.stop(), bos.stop()]));

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });

async function tokenize(body: Record<string, unknown>) {
  const res = await stack.post("/tokenize", body);
  expect(res.status, JSON.stringify(await res.clone().json())).toBe(200);
  return (await res.json()) as {
    count: number;
    max_model_len: number | null;
    tokens: number[];
    token_strs: string[] | null;
  };
}

async function detokenize(tokens: number[], model?: string) {
  const res = await stack.post("/detokenize", { tokens, ...(model ? { model } : {}) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { prompt: string }).prompt;
}

const messages = [
  { role: "system" as const, content: "Answer briefly." },
  { role: "user" as const, content: "What is a café? ☕" },
];

describe("vLLM's /tokenize and /detokenize", () => {
  it("a prompt's tokens are the ones /v1/completions runs: its usage counts them", async () => {
    const prompt = "The café sells ☕ and tea";
    const body = await tokenize({ model: "tiny-lm", prompt });
    // tiny-lm's tokenizer is its bytes
    expect(body).toEqual({
      count: Buffer.byteLength(prompt),
      max_model_len: 256,
      tokens: [...Buffer.from(prompt)],
      token_strs: null,
    });
    const done = await openai().completions.create({ model: "tiny-lm", prompt, max_tokens: 1 });
    expect(done.usage?.prompt_tokens).toBe(body.count);
    expect(await detokenize(body.tokens, "tiny-lm")).toBe(prompt);
  });

  it("messages are rendered as the chat renders them: the count is the chat's prompt_tokens, and they detokenize to its prompt", async () => {
    // no model named: the server's only text model, as vLLM serves its one
    const body = await tokenize({ messages });
    const chat = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      max_tokens: 1,
    });
    expect(chat.usage?.prompt_tokens).toBe(body.count);
    expect(await detokenize(body.tokens)).toBe(
      "System: Answer briefly.\nQ: What is a café? ☕\nA:",
    );
    // without the generation prompt: ends after the last message
    const bare = await tokenize({ messages, add_generation_prompt: false });
    expect(await detokenize(bare.tokens)).toBe("System: Answer briefly.\nQ: What is a café? ☕\n");
  });

  it("token_strs: each token as the vocabulary writes it", async () => {
    const body = await tokenize({ prompt: "hé", return_token_strs: true });
    expect(body.token_strs).toEqual(["h", "bytes:\\xc3", "bytes:\\xa9"]);
  });

  it("continue_final_message: the chat continues the assistant's open message, as a completion of the prompt /tokenize shows", async () => {
    const open = [
      { role: "user" as const, content: "Why is the sky blue?" },
      { role: "assistant" as const, content: "Because the" },
    ];
    const fields = { add_generation_prompt: false, continue_final_message: true };
    const rendered = await tokenize({ messages: open, ...fields });
    const prompt = await detokenize(rendered.tokens);
    expect(prompt).toBe("Q: Why is the sky blue?\nA: Because the");
    const chat = await openai().chat.completions.create({
      model: "tiny-lm",
      messages: open,
      max_tokens: 24,
      temperature: 0,
      ...fields,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const completion = await openai().completions.create({
      model: "tiny-lm",
      prompt,
      max_tokens: 24,
      temperature: 0,
    });
    expect(chat.usage?.prompt_tokens).toBe(rendered.count);
    expect(chat.choices[0]?.message.content).toBe(completion.choices[0]?.text);
    // and not what the default rendering (a new answer after "A:") gives
    const fresh = await openai().chat.completions.create({
      model: "tiny-lm",
      messages: open,
      max_tokens: 24,
      temperature: 0,
    });
    expect(fresh.usage?.prompt_tokens).not.toBe(rendered.count);
  });

  it("an embedder's tokens are the ones /v1/embeddings counts, its window its max_model_len", async () => {
    const text = "The fortune you seek is in another cookie.";
    const counted = await tokenize({ model: "bert-fortunes", prompt: text });
    expect(counted.max_model_len).toBe(128);
    const res = await stack.post("/v1/embeddings", { model: "bert-fortunes", input: text });
    expect(res.status).toBe(200);
    const { usage } = (await res.json()) as { usage: { prompt_tokens: number } };
    expect(counted.count).toBe(usage.prompt_tokens);
    expect(counted.tokens).toHaveLength(counted.count);
    // its special tokens open and close it; without them, the text's own alone
    const bare = await tokenize({
      model: "bert-fortunes",
      prompt: text,
      add_special_tokens: false,
    });
    expect(bare.count).toBe(counted.count - 2);
    expect(counted.tokens.slice(1, -1)).toEqual(bare.tokens);
    expect((await detokenize(bare.tokens, "bert-fortunes")).toLowerCase()).toContain("fortune");
    const refused = async (body: unknown, message: RegExp) => {
      const answer = await stack.post("/tokenize", body);
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(
        message,
      );
    };
    await refused({ model: "bert-fortunes", messages }, /embedder, which has no chat template/);
    await refused(
      { model: "bert-fortunes", prompt: "x".repeat(128 * 64 + 1) },
      /maximum context length is 128 tokens; .* far more than fit/,
    );
  });

  it("refuses what it cannot answer, naming the problem", async () => {
    const refused = async (path: string, body: unknown, status: number, message: RegExp) => {
      const res = await stack.post(path, body);
      expect(res.status).toBe(status);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
    };
    await refused("/tokenize", { prompt: "a", messages }, 400, /either prompt or messages/);
    await refused("/tokenize", { model: "tiny-lm" }, 400, /either prompt or messages/);
    await refused(
      "/tokenize",
      { messages, continue_final_message: true },
      400,
      /Cannot set both `continue_final_message` and `add_generation_prompt`/,
    );
    await refused(
      "/tokenize",
      { prompt: "a", add_generation_prompt: false },
      400,
      /applies to messages/,
    );
    await refused(
      "/tokenize",
      { messages, chat_template: "{{ 1 }}" },
      400,
      /chat_template is not supported/,
    );
    await refused(
      "/tokenize",
      { model: "mnist", prompt: "a" },
      400,
      /classifier, which has no tokenizer/,
    );
    await refused("/tokenize", { model: "nope", prompt: "a" }, 404, /nope/);
    await refused("/tokenize", { prompt: "x".repeat(256 * 64 + 1) }, 400, /far more than fit/);
    await refused("/detokenize", { tokens: [104, 300] }, 400, /Token id 300 is out of vocabulary/);
    await refused(
      "/detokenize",
      { tokens: Array.from({ length: 256 * 64 + 1 }, () => 104) },
      400,
      /16385 tokens are far more than fit/,
    );
    // the chat refuses the same contradiction
    await refused(
      "/v1/chat/completions",
      { model: "tiny-lm", messages, continue_final_message: true },
      400,
      /Cannot set both/,
    );
  });

  it("add_special_tokens (vLLM's, default true for a completion, false for a chat): the BOS a tokenizer adds reaches the model", async () => {
    const prompt = "Q: Why is the sky blue?\nA:";
    const bytes = [...Buffer.from(prompt)];
    const client = new OpenAI({ baseURL: bos.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const complete = (extra: Record<string, unknown>) =>
      client.completions.create({
        model: "tiny-lm",
        prompt,
        max_tokens: 16,
        temperature: 0,
        ...extra,
      } as OpenAI.CompletionCreateParamsNonStreaming);
    const [withBos, without] = [
      await referenceGreedy([256, ...bytes], 16),
      await referenceGreedy(bytes, 16),
    ];
    expect(withBos).not.toBe(without); // else this test could not tell them apart
    const byDefault = await complete({});
    expect(byDefault.choices[0]?.text).toBe(withBos);
    expect(byDefault.usage?.prompt_tokens).toBe(bytes.length + 1);
    const bare = await complete({ add_special_tokens: false });
    expect(bare.choices[0]?.text).toBe(without);
    expect(bare.usage?.prompt_tokens).toBe(bytes.length);
    // /tokenize says the same, and a chat adds none unless asked
    const res = await bos.post("/tokenize", { prompt });
    expect(((await res.json()) as { tokens: number[] }).tokens).toEqual([256, ...bytes]);
    const chat = (extra: Record<string, unknown>) =>
      client.chat.completions.create({
        model: "tiny-lm",
        messages: [{ role: "user", content: "Why is the sky blue?" }],
        max_tokens: 1,
        ...extra,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect((await chat({})).usage?.prompt_tokens).toBe(bytes.length);
    expect((await chat({ add_special_tokens: true })).usage?.prompt_tokens).toBe(bytes.length + 1);
    // an echo is the client's text, its logprobs the tokens the model read (the BOS first)
    const echoed = await complete({ echo: true, logprobs: 0, max_tokens: 1 });
    expect(echoed.choices[0]?.text.startsWith(prompt)).toBe(true);
    expect(echoed.choices[0]?.logprobs?.tokens?.[0]).toBe("<|endoftext|>");
    expect(echoed.choices[0]?.logprobs?.token_logprobs?.[0]).toBeNull();
  });
});
