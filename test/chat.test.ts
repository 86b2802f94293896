import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { HumanMessage } from "@langchain/core/messages";
import { ChatOpenAI, OpenAI as LangChainOpenAI } from "@langchain/openai";
import { generateText, streamText, tool } from "ai";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { tempRepository } from "./helpers/model-repo.js";
import { readSse } from "./helpers/sse.js";
import { Stack } from "./helpers/stack.js";
import { time, WeatherArgs, weather } from "./helpers/tools.js";
import { tokenCounts } from "./helpers/usage.js";

// A second generator without a chat template, beside tiny-lm: chat must refuse it, not guess.
// tiny-lm as a model whose calls Hermes' format would carry (vLLM's --tool-call-parser hermes)
const repo = tempRepository({ "tiny-lm": { tool_call_parser: "hermes" } });
const bare = tempRepository({ "tiny-lm": { name: "tiny-lm", chat_template: undefined } });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } });
const plain = new Stack({ workers: 0, env: { MODEL_REPOSITORY: bare } });
beforeAll(() => Promise.all([stack.start(), plain.start()]));
afterAll(() => Promise.all([stack.stop(), plain.stop()]));

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });

/**
 * Sampled answers (one per seed) through the openai client's `parse` with a zod response
 * format: each whole and valid by the schema (parse() throws on an answer cut short or one zod
 * refuses), and not all one text.
 */
async function expectParsedEach(schema: z.ZodType, name: string, question: string, n: number) {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, k) =>
      openai().chat.completions.parse({
        model: "tiny-lm",
        messages: [{ role: "user", content: question }],
        temperature: 0.8,
        seed: k + 1,
        response_format: zodResponseFormat(schema, name),
      }),
    ),
  );
  for (const answer of answers) {
    expect(answer.choices[0]?.finish_reason).toBe("stop");
    const parsed = answer.choices[0]?.message.parsed;
    expect(schema.parse(parsed)).toEqual(parsed);
  }
  expect(new Set(answers.map((a) => a.choices[0]?.message.content)).size).toBeGreaterThan(1);
}
const ask = [{ role: "user" as const, content: "Why is the sky blue?" }];

describe("the openai client, unchanged", () => {
  it("chat, not streamed: one assistant message, a finish reason and usage", async () => {
    const res = await openai().chat.completions.create({
      model: "tiny-lm",
      messages: [{ role: "system", content: "Answer briefly." }, ...ask],
      max_tokens: 40,
      seed: 3,
    });
    expect(res.object).toBe("chat.completion");
    expect(res.choices[0]?.message.role).toBe("assistant");
    expect(typeof res.choices[0]?.message.content).toBe("string");
    expect(["stop", "length"]).toContain(res.choices[0]?.finish_reason);
    expect(res.usage?.total_tokens).toBe(
      (res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0),
    );
  });

  it("chat, streamed: role first, content deltas, a finish reason, then the usage chunk", async () => {
    const stream = await openai().chat.completions.create({
      model: "tiny-lm",
      messages: ask,
      max_completion_tokens: 30,
      stream: true,
      stream_options: { include_usage: true },
      seed: 4,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    const finished = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finished).toHaveLength(1);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
    expect(text.length).toBeGreaterThan(0);
  });

  it("array-of-text-parts content, and stop strings", async () => {
    const res = await openai().chat.completions.create({
      model: "tiny-lm",
      messages: [{ role: "user", content: [{ type: "text", text: "Tell me a fortune." }] }],
      max_tokens: 60,
      stop: ["e"],
      temperature: 0,
    });
    expect(res.choices[0]?.message.content).not.toContain("e");
  });

  it("logit_bias and penalties reach the worker: a banned letter never appears", async () => {
    const greedy = { model: "tiny-lm", messages: ask, max_tokens: 60, temperature: 0 };
    const plain = await openai().chat.completions.create(greedy);
    expect(plain.choices[0]?.message.content).toMatch(/e/);
    const banned = await openai().chat.completions.create({
      ...greedy,
      logit_bias: { "101": -100 },
      frequency_penalty: 0.5,
    });
    expect(banned.choices[0]?.message.content).not.toMatch(/e/);
    // a part this text model cannot read is refused by name
    const image = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }],
    });
    expect(image.status).toBe(400);
    expect(((await image.json()) as { error: { message: string } }).error.message).toBe(
      "messages.0.content.0: content of type image_url is not supported by this server (text is)",
    );
  });

  it("logprobs with top_logprobs: a token, its bytes and its alternatives per token of the answer, streamed or not", async () => {
    const greedy = {
      model: "tiny-lm",
      messages: ask,
      max_tokens: 20,
      temperature: 0,
      logprobs: true,
      top_logprobs: 2,
    };
    const res = await openai().chat.completions.create(greedy);
    const content = res.choices[0]?.logprobs?.content ?? [];
    expect(content.map((t) => t.token).join("")).toBe(res.choices[0]?.message.content);
    expect(content).toHaveLength(res.usage?.completion_tokens ?? -1);
    for (const t of content) {
      expect(t.bytes).toEqual([...Buffer.from(t.token)]);
      expect(t.top_logprobs).toHaveLength(2);
      // greedy: the token is the likeliest alternative
      expect(t.top_logprobs[0]).toEqual({ token: t.token, logprob: t.logprob, bytes: t.bytes });
      expect(t.logprob).toBeLessThanOrEqual(0);
    }
    const stream = await openai().chat.completions.create({ ...greedy, stream: true });
    const streamed = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    // the same tokens, their figures to the rounding of another run's batch
    expect(streamed.map((t) => t.token)).toEqual(content.map((t) => t.token));
    for (const [i, t] of content.entries()) expect(streamed[i]?.logprob).toBeCloseTo(t.logprob, 3);
    const res2 = await stack.post("/v1/chat/completions", { ...greedy, logprobs: false });
    expect(res2.status).toBe(400);
    expect(((await res2.json()) as { error: { message: string } }).error.message).toBe(
      "top_logprobs needs logprobs: true",
    );
  });

  it("no max_tokens: the answer may use what the context leaves (a completion makes 16)", async () => {
    const res = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: ask,
      temperature: 0,
      ignore_eos: true,
    });
    const { usage, choices } = (await res.json()) as {
      usage: { prompt_tokens: number; completion_tokens: number };
      choices: Array<{ finish_reason: string }>;
    };
    expect(usage.prompt_tokens + usage.completion_tokens).toBe(256);
    expect(choices[0]?.finish_reason).toBe("length");
    const completion = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Hi",
      ignore_eos: true,
    });
    expect(
      ((await completion.json()) as typeof usage & { usage: typeof usage }).usage,
    ).toMatchObject({ completion_tokens: 16 });
  });

  it("a seed gives the same answer alone and beside other requests", async () => {
    const one = () =>
      openai().chat.completions.create({
        model: "tiny-lm",
        messages: ask,
        max_tokens: 40,
        temperature: 0.9,
        seed: 1234,
        // a different mix of batch neighbours each time must not change the draws
      });
    const alone = await one();
    const noise = Array.from({ length: 6 }, (_, k) =>
      openai().chat.completions.create({
        model: "tiny-lm",
        messages: [{ role: "user", content: `Noise ${k}?` }],
        max_tokens: 30 + k * 7,
        seed: k,
      }),
    );
    const [mixed] = await Promise.all([one(), ...noise]);
    expect(mixed.choices[0]?.message.content).toBe(alone.choices[0]?.message.content);
  });

  it("n choices: the j-th draws with seed + j, streamed or not; the prompt's tokens counted once", async () => {
    const sampled = { model: "tiny-lm", messages: ask, max_tokens: 20, temperature: 1 };
    const res = await openai().chat.completions.create({ ...sampled, n: 3, seed: 70 });
    const alone = await Promise.all(
      [0, 1, 2].map((j) => openai().chat.completions.create({ ...sampled, seed: 70 + j })),
    );
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(res.choices.map((c) => c.message.content)).toEqual(
      alone.map((one) => one.choices[0]?.message.content),
    );
    expect(new Set(res.choices.map((c) => c.message.content)).size).toBeGreaterThan(1);
    const completionTokens = alone.reduce((n, one) => n + (one.usage?.completion_tokens ?? 0), 0);
    expect(res.usage).toMatchObject({
      prompt_tokens: alone[0]?.usage?.prompt_tokens,
      completion_tokens: completionTokens,
    });
    const stream = await openai().chat.completions.create({
      ...sampled,
      n: 3,
      seed: 70,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts = ["", "", ""];
    const firsts: Array<string | undefined> = [];
    const finishes: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      usage = chunk.usage ?? usage;
      for (const choice of chunk.choices) {
        // each choice opens with the assistant's role, as OpenAI streams n > 1
        firsts[choice.index] ??= choice.delta.role;
        texts[choice.index] += choice.delta.content ?? "";
        if (choice.finish_reason) finishes.push(choice.index);
      }
    }
    expect(firsts).toEqual(["assistant", "assistant", "assistant"]);
    expect(texts).toEqual(res.choices.map((c) => c.message.content));
    expect(finishes.sort()).toEqual([0, 1, 2]);
    expect(tokenCounts(usage)).toEqual(tokenCounts(res.usage));
    // past the largest exact integer seed + j would round, two choices drawing alike: a 400
    const top = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
      n: 4,
      seed: Number.MAX_SAFE_INTEGER - 1,
    });
    expect(top.status).toBe(400);
    expect(((await top.json()) as { error: { message: string } }).error.message).toMatch(
      /^seed \+ n - 1/,
    );
  });

  it("JSON mode (response_format json_object): every answer that ends is one JSON object, streamed or not", async () => {
    const messages = [{ role: "user" as const, content: "Give me a JSON object with a name." }];
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, seed) =>
        openai().chat.completions.create({
          model: "tiny-lm",
          messages,
          temperature: 0.8,
          seed,
          response_format: { type: "json_object" },
        }),
      ),
    );
    const ended = answers.filter((a) => a.choices[0]?.finish_reason === "stop");
    // the rest ran out of window inside a string: what OpenAI's JSON mode warns of too
    expect(ended.length).toBeGreaterThan(0);
    for (const answer of ended) {
      const parsed = JSON.parse(answer.choices[0]?.message.content ?? "") as unknown;
      expect(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)).toBe(true);
    }
    // unguided, the same seeds are no JSON at all
    const free = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      temperature: 0.8,
      seed: 0,
      max_tokens: 40,
    });
    expect(() => JSON.parse(free.choices[0]?.message.content ?? "")).toThrow();
    // streamed, the same text as not
    const seed = answers.indexOf(ended[0] as (typeof answers)[number]);
    const stream = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      temperature: 0.8,
      seed,
      stream: true,
      response_format: { type: "json_object" },
    });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
    expect(streamed).toBe(ended[0]?.choices[0]?.message.content);
  });

  it("structured outputs: the openai client's zod response format parses every answer (response_format json_schema)", async () => {
    const Verdict = z.object({
      answer: z.enum(["yes", "no", "maybe"]),
      confident: z.boolean(),
      count: z.number().int().nonnegative(),
      note: z.string().max(12),
      tags: z.array(z.string().max(5)).max(2),
    });
    await expectParsedEach(Verdict, "verdict", "Is the sky blue? Answer in JSON.", 6);
    // vLLM's guided_json on a completion: a schema's JSON text
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Point:",
      max_tokens: 200,
      seed: 3,
      guided_json: JSON.stringify({
        type: "object",
        // bounded, as zod's .min()/.max() write them (unbounded, a tiny model's digits run on)
        properties: {
          x: { type: "integer", minimum: -999, maximum: 999 },
          y: { type: "integer", minimum: -999, maximum: 999 },
        },
        required: ["x", "y"],
      }),
    });
    const point = JSON.parse(
      ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]?.text ?? "",
    ) as unknown;
    expect(z.object({ x: z.number().int(), y: z.number().int() }).strict().parse(point)).toEqual(
      point,
    );
    // a keyword it cannot guide by is refused by name
    const refused = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: ask,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "x",
          schema: { type: "object", properties: { d: { type: "array", uniqueItems: true } } },
        },
      },
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe(
      "response_format json_schema: at /properties/d/uniqueItems: keyword 'uniqueItems' is not supported",
    );
  });

  it("structured outputs with zod's string checks (a regex, a UUID, an ISO date): every answer passes them", async () => {
    const Ticket = z.object({
      code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
      id: z.uuid(),
      day: z.iso.date(),
    });
    await expectParsedEach(Ticket, "ticket", "Book me a ticket.", 4);
  });

  const Args = WeatherArgs;

  it("tools: a forced call's arguments meet its parameters' schema, streamed or not; auto without a call parser is refused by name", async () => {
    const messages = [{ role: "user" as const, content: "Weather in Oslo?" }];
    const forced = {
      model: "tiny-lm",
      messages,
      tools: [weather, time],
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      temperature: 0.8,
      seed: 2,
    };
    const named = await openai().chat.completions.create(forced);
    const choice = named.choices[0];
    expect(choice?.finish_reason).toBe("stop");
    expect(choice?.message.content).toBeNull();
    const call = choice?.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    const args = call?.type === "function" ? call.function.arguments : "";
    expect(Args.parse(JSON.parse(args))).toEqual(JSON.parse(args));
    // streamed: the call named first, its arguments in pieces, the same in the end
    const stream = await openai().chat.completions.create({ ...forced, stream: true });
    let name = "";
    let streamed = "";
    for await (const chunk of stream)
      for (const part of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += part.function?.name ?? "";
        streamed += part.function?.arguments ?? "";
      }
    expect([name, streamed]).toEqual(["get_weather", args]);
    // required over several tools: the model picks one, and it is a call of it
    const picked = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      tools: [weather, time],
      tool_choice: "required",
      seed: 5,
    });
    const pickedCall = picked.choices[0]?.message.tool_calls?.[0];
    const pickedName = pickedCall?.type === "function" ? pickedCall.function.name : "";
    expect(["get_weather", "get_time"]).toContain(pickedName);
    expect(picked.choices[0]?.finish_reason).toBe("tool_calls");
    // its arguments as the model wrote them: the parameters of the tool it named
    const pickedArgs = pickedCall?.type === "function" ? pickedCall.function.arguments : "";
    expect(typeof JSON.parse(pickedArgs)).toBe("object");
    // streamed (it had been a 400, and the openai client, the AI SDK and LangChain failed
    // with it): the call opens named, its arguments come in pieces, the same call in the end
    const pickedStream = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      tools: [weather, time],
      tool_choice: "required",
      seed: 5,
      stream: true,
    });
    const parts: Array<{
      id: string | undefined;
      name: string | undefined;
      arguments: string | undefined;
    }> = [];
    let pickedFinish: string | null | undefined;
    for await (const chunk of pickedStream) {
      for (const part of chunk.choices[0]?.delta?.tool_calls ?? [])
        parts.push({ id: part.id, name: part.function?.name, arguments: part.function?.arguments });
      pickedFinish = chunk.choices[0]?.finish_reason ?? pickedFinish;
    }
    expect(parts[0]?.id).toMatch(/^call_/);
    expect(parts[0]?.name).toBe(pickedName);
    // the call opens named, and the arguments follow (in pieces: tool-calls.test.ts)
    expect(parts.length).toBeGreaterThanOrEqual(2);
    expect(parts.map((p) => p.arguments ?? "").join("")).toBe(pickedArgs);
    expect(pickedFinish).toBe("tool_calls");
    // tools whose parameters are pydantic models ($defs, $ref): each one's references follow
    // it into the schema of all of them (they had pointed at nothing: a 400)
    const place = {
      type: "object",
      properties: { where: { $ref: "#/$defs/Place" } },
      required: ["where"],
      $defs: {
        Place: {
          type: "object",
          properties: { city: { type: "string", maxLength: 8 } },
          required: ["city"],
        },
      },
    };
    const models = await openai().chat.completions.create({
      model: "tiny-lm",
      messages,
      tools: ["go", "stay"].map((name) => ({
        type: "function" as const,
        function: { name, parameters: place },
      })),
      tool_choice: "required",
      seed: 5,
    });
    const modelCall = models.choices[0]?.message.tool_calls?.[0];
    const modelArgs =
      modelCall?.type === "function" ? JSON.parse(modelCall.function.arguments) : {};
    expect(typeof (modelArgs as { where: { city: string } }).where.city).toBe("string");
    // the conversation goes on with the call and the tool's answer in it
    const next = await openai().chat.completions.create({
      model: "tiny-lm",
      max_tokens: 5,
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: choice?.message.tool_calls ?? [] },
        { role: "tool", tool_call_id: call?.id ?? "", content: "12 degrees" },
      ],
    });
    expect(typeof next.choices[0]?.message.content).toBe("string");
    // a forced call is its own guide: with another, a 400 naming both
    const both = await stack.post("/v1/chat/completions", {
      ...forced,
      response_format: { type: "json_object" },
    });
    expect(both.status).toBe(400);
    expect(((await both.json()) as { error: { message: string } }).error.message).toBe(
      "give one of json_object, a forced tool call, not several",
    );
    // a model whose model.json names no call parser: "auto" (the default with tools) is a 400
    const auto = await plain.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages,
      tools: [weather],
    });
    expect(auto.status).toBe(400);
    expect(((await auto.json()) as { error: { message: string } }).error.message).toMatch(
      /^tool_choice "auto" .* needs a parser of the model's own call format, and this model's model.json names none \(tool_call_parser/,
    );
  });

  it('tool_choice "auto" with a Hermes model: its calls are tool_calls (the text before them the content), streamed or not, and text alone stays text', async () => {
    // tiny-lm writes no calls of its own: a guided regex makes it write one in Hermes' format
    const call = `<tool_call>\\{"name": "get_weather", "arguments": \\{"city": "[A-Z][a-z]{1,8}", "unit": "(celsius|fahrenheit)"\\}\\}</tool_call>`;
    const guided = { guided_regex: `Let me check\\. ${call}` };
    const params = {
      model: "tiny-lm",
      messages: [{ role: "user" as const, content: "Weather in Oslo?" }],
      tools: [weather],
      temperature: 0.8,
      seed: 7,
      ...guided,
    };
    const whole = await openai().chat.completions.create(params);
    const choice = whole.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.content).toBe("Let me check. ");
    const [made] = choice?.message.tool_calls ?? [];
    const fn = made?.type === "function" ? made.function : undefined;
    expect(fn?.name).toBe("get_weather");
    const args = Args.parse(JSON.parse(fn?.arguments ?? ""));
    expect(args.city).toMatch(/^[A-Z][a-z]{1,8}$/);
    expect(made?.id).toMatch(/^call_/);
    // streamed: the content as it comes, then the call, named first and its arguments as they
    // come (vLLM's); the same answer in the end
    const stream = await openai().chat.completions.create({ ...params, stream: true });
    let content = "";
    const calls: Array<{ id?: string | undefined; name: string; arguments: string }> = [];
    let finish: string | null | undefined;
    let pieces = 0;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      content += delta?.content ?? "";
      for (const part of delta?.tool_calls ?? []) {
        calls[part.index] ??= { name: "", arguments: "" };
        const at = calls[part.index] as {
          id?: string | undefined;
          name: string;
          arguments: string;
        };
        at.id ??= part.id;
        pieces++;
        at.name += part.function?.name ?? "";
        at.arguments += part.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect([content, finish]).toEqual(["Let me check. ", "tool_calls"]);
    expect(pieces).toBeGreaterThan(2);
    // (another job: its own call id)
    expect(calls).toEqual([
      { id: expect.stringMatching(/^call_/), name: "get_weather", arguments: fn?.arguments },
    ]);
    // Vercel's AI SDK reads the call as a tool call of its own tool, input checked by its schema
    const sdkModel = createOpenAICompatible({ name: "ferry", baseURL: stack.url("/v1") }).chatModel(
      "tiny-lm",
    );
    const sdkAsk = {
      prompt: "Weather in Oslo?",
      temperature: 0.8,
      seed: 7,
      providerOptions: { ferry: guided },
    };
    const sdk = await generateText({
      model: sdkModel,
      tools: { get_weather: tool({ description: "the weather in a city", inputSchema: Args }) },
      ...sdkAsk,
    });
    expect(sdk.finishReason).toBe("tool-calls");
    expect(sdk.toolCalls.map((c) => [c.toolName, c.input])).toEqual([
      ["get_weather", JSON.parse(fn?.arguments ?? "")],
    ]);
    // and streamed: the call's input in pieces, put together and checked the same way
    const sdkStream = streamText({
      model: sdkModel,
      tools: { get_weather: tool({ description: "the weather in a city", inputSchema: Args }) },
      ...sdkAsk,
    });
    let inputDeltas = 0;
    for await (const part of sdkStream.fullStream)
      if (part.type === "tool-input-delta") inputDeltas++;
    expect(inputDeltas).toBeGreaterThan(1);
    expect((await sdkStream.toolCalls).map((c) => [c.toolName, c.input])).toEqual([
      ["get_weather", JSON.parse(fn?.arguments ?? "")],
    ]);
    // two calls written; with parallel_tool_calls: false, the first alone, streamed or not
    const twice = {
      ...params,
      guided_regex: `${call}\\n${call}`,
      parallel_tool_calls: false,
    } as typeof params;
    const single = await openai().chat.completions.create(twice);
    expect(single.choices[0]?.message.tool_calls).toHaveLength(1);
    const both = await openai().chat.completions.create({ ...twice, parallel_tool_calls: true });
    expect(both.choices[0]?.message.tool_calls).toHaveLength(2);
    const streamedCalls = new Set<number>();
    for await (const chunk of await openai().chat.completions.create({ ...twice, stream: true }))
      for (const part of chunk.choices[0]?.delta?.tool_calls ?? []) streamedCalls.add(part.index);
    expect([...streamedCalls]).toEqual([0]);
    // text without a call is the answer's content, finished as text is
    const text = await openai().chat.completions.create({
      ...params,
      guided_regex: "It is (sunny|raining) in Oslo\\.",
    } as typeof params);
    expect(text.choices[0]?.message.content).toMatch(/^It is (sunny|raining) in Oslo\.$/);
    expect(text.choices[0]?.message.tool_calls).toBeUndefined();
    expect(text.choices[0]?.finish_reason).toBe("stop");
  });

  it("OpenAI's errors: bad role, no messages, n < 1, top_logprobs past 20, a prompt past the context", async () => {
    const bad = async (body: Record<string, unknown>, pattern: RegExp) => {
      const res = await stack.post("/v1/chat/completions", { model: "tiny-lm", ...body });
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { message: string; type: string } }).error;
      expect(error.type).toBe("invalid_request_error");
      expect(error.message).toMatch(pattern);
    };
    await bad({ messages: [{ role: "wizard", content: "hi" }] }, /messages\.0\.role/);
    await bad({ messages: [] }, /at least one message/);
    await bad({ messages: ask, n: 0 }, /^n: /);
    await bad({ messages: ask, logprobs: true, top_logprobs: 21 }, /^top_logprobs: /);
    await bad(
      { messages: ask, response_format: { type: "grammar", grammar: "root ::= x" } },
      /response_format type must be text, json_object or json_schema/,
    );
    await bad({ messages: ask, functions: [{ name: "f" }] }, /^functions: /);
    await bad({ messages: ask, function_call: { name: "f" } }, /^function_call: /);
    await bad({ messages: ask, modalities: ["text", "audio"] }, /^modalities: /);
    // vLLM's chat fields that would change the answer and Ferry lacks
    await bad({ messages: ask, echo: true }, /^echo: echo is not supported/);
    await bad({ messages: ask, chat_template: "{{ 1 }}" }, /^chat_template: /);
    await bad({ messages: ask, documents: [{ text: "x" }] }, /^documents: /);
    // their no-op values pass
    const fine = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: ask,
      max_tokens: 2,
      response_format: { type: "text" },
      modalities: ["text"],
      echo: false,
    });
    expect(fine.status).toBe(200);
    await bad(
      { messages: [{ role: "user", content: "x".repeat(300) }], max_tokens: 10 },
      /maximum context length is 256 tokens\. However, you requested 31\d tokens \(30\d in the prompt, 10 for the completion\)/,
    );
  });

  it("a generator without a chat template refuses chat with a 400", async () => {
    const res = await plain.post("/v1/chat/completions", { model: "tiny-lm", messages: ask });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /has no chat template/,
    );
  });
});

describe("Vercel's AI SDK (createOpenAICompatible), unchanged", () => {
  const provider = () => createOpenAICompatible({ name: "ferry", baseURL: stack.url("/v1") });

  it("generateText and streamText with chatModel", async () => {
    const { text, finishReason } = await generateText({
      model: provider().chatModel("tiny-lm"),
      prompt: "Why is the sky blue?",
      maxOutputTokens: 30,
    });
    expect(typeof text).toBe("string");
    expect(["stop", "length"]).toContain(finishReason);
    const streamed = streamText({
      model: provider().chatModel("tiny-lm"),
      prompt: "Tell me a fortune.",
      maxOutputTokens: 30,
    });
    let joined = "";
    for await (const part of streamed.textStream) joined += part;
    expect(joined).toBe(await streamed.text);
  });

  it("generateText and streamText with completionModel", async () => {
    const { text } = await generateText({
      model: provider().completionModel("tiny-lm"),
      prompt: "It was a dark and stormy night",
      maxOutputTokens: 20,
    });
    expect(text.length).toBeGreaterThan(0);
    const streamed = streamText({
      model: provider().completionModel("tiny-lm"),
      prompt: "It was a dark and stormy night",
      maxOutputTokens: 20,
    });
    let joined = "";
    for await (const part of streamed.textStream) joined += part;
    expect(joined.length).toBeGreaterThan(0);
  });
});

describe("LangChain.js ChatOpenAI, unchanged", () => {
  const chat = () =>
    new ChatOpenAI({
      model: "tiny-lm",
      apiKey: "unused",
      maxTokens: 30,
      configuration: { baseURL: stack.url("/v1") },
    });

  it("withStructuredOutput, by a function call and by a JSON schema: a zod-checked object each", async () => {
    const Verdict = z.object({
      answer: z.enum(["yes", "no"]),
      confidence: z.number().int().nonnegative(),
    });
    for (const method of ["functionCalling", "jsonSchema"] as const) {
      const model = new ChatOpenAI({
        model: "tiny-lm",
        apiKey: "unused",
        configuration: { baseURL: stack.url("/v1") },
      }).withStructuredOutput(Verdict, { method });
      const verdict = await model.invoke("Is the sky blue?");
      expect(Verdict.parse(verdict)).toEqual(verdict);
    }
  });

  it("invoke and stream", async () => {
    const message = await chat().invoke("Why is the sky blue?");
    expect(typeof message.content).toBe("string");
    let joined = "";
    for await (const chunk of await chat().stream("Tell me a fortune.")) joined += chunk.content;
    expect(typeof joined).toBe("string");
  });

  it("generate with n: 2 gives two generations per conversation", async () => {
    const two = new ChatOpenAI({
      model: "tiny-lm",
      apiKey: "unused",
      maxTokens: 12,
      n: 2,
      configuration: { baseURL: stack.url("/v1") },
    });
    const result = await two.generate([[new HumanMessage("Tell me a fortune.")]]);
    expect(result.generations[0]).toHaveLength(2);
    for (const generation of result.generations[0] ?? [])
      expect(typeof generation.text).toBe("string");
  });
});

describe("LangChain.js OpenAI (the completion model), unchanged", () => {
  // it sends its prompts as one list per request (up to its batchSize of 20)
  it("generate over several prompts: one generation each, in order", async () => {
    const options = {
      model: "tiny-lm",
      apiKey: "unused",
      maxTokens: 12,
      temperature: 0,
      configuration: { baseURL: stack.url("/v1") },
    };
    const llm = new LangChainOpenAI(options);
    const prompts = ["Once upon a time", "The best way to", "Love is"];
    const result = await llm.generate(prompts);
    const alone = await Promise.all(
      prompts.map(async (prompt) => (await llm.generate([prompt])).generations[0]?.[0]?.text),
    );
    expect(result.generations.map((g) => g[0]?.text)).toEqual(alone);
    expect(result.llmOutput?.tokenUsage?.completionTokens).toBe(36);
    // streaming: true sends the same list with stream: true
    const streamed = await new LangChainOpenAI({ ...options, streaming: true }).generate(prompts);
    expect(streamed.generations.map((g) => g[0]?.text)).toEqual(alone);
  });
});

describe("a chat stream is a job: resumable", () => {
  it("its events, read through /v1/jobs/{X-Job-Id}/events, dropped mid-way and resumed with Last-Event-ID, give exactly the rest", async () => {
    const res = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: ask,
      max_tokens: 150,
      ignore_eos: true,
      stream: true,
      seed: 9,
    });
    const job = res.headers.get("x-job-id") ?? "";
    expect(job).not.toBe("");
    // the chat stream itself is read to its end, in the background
    let streamed = "";
    const whole = readSse(res, (e) => {
      if (e.data === "[DONE]") return undefined;
      const chunk = JSON.parse(e.data) as { choices: Array<{ delta: { content?: string } }> };
      streamed += chunk.choices[0]?.delta.content ?? "";
      return undefined;
    });
    // a second reader of the same job drops after a few tokens, then resumes
    let text = "";
    let lastId = "";
    let tokens = 0;
    const first = await fetch(stack.url(`/v1/jobs/${job}/events`));
    await readSse(
      first,
      (e) => {
        lastId = e.id ?? lastId;
        if (e.event !== "token") return undefined;
        text += (JSON.parse(e.data) as { text: string }).text;
        return ++tokens >= 10 ? "stop" : undefined;
      },
      new AbortController(),
    );
    const rest = await fetch(stack.url(`/v1/jobs/${job}/events`), {
      headers: { "Last-Event-ID": lastId },
    });
    let result = "";
    const ids = new Set<string>();
    await readSse(rest, (e) => {
      if (e.id) ids.add(e.id);
      const body = JSON.parse(e.data) as { text?: string; result?: { text: string } };
      if (e.event === "token") text += body.text ?? "";
      if (e.event === "result") result = body.result?.text ?? "";
      return undefined;
    });
    await whole;
    expect(ids.has(lastId)).toBe(false);
    expect(result.length).toBeGreaterThan(0);
    expect(text).toBe(result);
    expect(streamed).toBe(result);
  });
});
