import { createOpenAI } from "@ai-sdk/openai";
import { createRedis, Keys } from "@ferry/transport";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { tempRepository } from "./helpers/model-repo.js";
import { REDIS_TARGET, Stack, waitFor } from "./helpers/stack.js";
import { time as chatTime, weather as chatWeather, flat, WeatherArgs } from "./helpers/tools.js";

// tiny-lm as a model whose calls Hermes' format would carry, so that tool_choice "auto" is served
const repo = tempRepository({ "tiny-lm": { tool_call_parser: "hermes" } });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } });
// no worker: a background response stays queued
const idle = new Stack({ workers: 0, env: { MODEL_REPOSITORY: repo } });
beforeAll(() => Promise.all([stack.start(), idle.start()]));
afterAll(() => Promise.all([stack.stop(), idle.stop()]));

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
const greedy = { model: "tiny-lm", temperature: 0 } as const;

/** The chat completion a response must equal: the same messages, greedy, as many tokens. */
async function chatOf(messages: OpenAI.ChatCompletionMessageParam[], maxTokens: number) {
  const chat = await openai().chat.completions.create({
    ...greedy,
    messages,
    max_tokens: maxTokens,
  });
  return {
    text: chat.choices[0]?.message.content ?? "",
    finish: chat.choices[0]?.finish_reason,
    promptTokens: chat.usage?.prompt_tokens,
  };
}

describe("OpenAI's Responses API, through the openai client", () => {
  it("a response is the chat of its input (instructions as the system message): text, status, usage", async () => {
    const res = await openai().responses.create({
      ...greedy,
      instructions: "Answer briefly.",
      input: "Why is the sky blue?",
      max_output_tokens: 24,
    });
    const chat = await chatOf(
      [
        { role: "system", content: "Answer briefly." },
        { role: "user", content: "Why is the sky blue?" },
      ],
      24,
    );
    expect(res.object).toBe("response");
    expect(res.id).toMatch(/^resp_/);
    expect(res.output_text).toBe(chat.text);
    expect(res.output_text.length).toBeGreaterThan(0);
    expect(res.status).toBe(chat.finish === "length" ? "incomplete" : "completed");
    expect(res.usage?.input_tokens).toBe(chat.promptTokens);
    expect(res.instructions).toBe("Answer briefly.");
    // the response's job: its tokens counted as the chat's
    expect(res.usage?.output_tokens).toBeGreaterThan(0);
  });

  it("include message.output_text.logprobs: the chat's log probabilities, whole and streamed", async () => {
    const ask = {
      ...greedy,
      input: "Why is the sea salty?",
      max_output_tokens: 12,
      include: ["message.output_text.logprobs" as const],
      top_logprobs: 2,
    };
    const res = await openai().responses.create(ask);
    const part = res.output[0]?.type === "message" ? res.output[0].content[0] : undefined;
    const logprobs = part?.type === "output_text" ? (part.logprobs ?? []) : [];
    const chat = await openai().chat.completions.create({
      ...greedy,
      messages: [{ role: "user", content: "Why is the sea salty?" }],
      max_tokens: 12,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(logprobs).toHaveLength(12);
    expect(logprobs).toEqual(chat.choices[0]?.logprobs?.content);
    expect(logprobs.every((l) => l.top_logprobs.length === 2)).toBe(true);
    const streamed: unknown[] = [];
    for await (const event of openai().responses.stream(ask))
      if (event.type === "response.output_text.delta") streamed.push(...(event.logprobs ?? []));
    expect(streamed).toEqual(logprobs);
    await expect(
      openai().responses.create({ ...ask, include: ["file_search_call.results"] }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it("max_output_tokens ends it incomplete, saying why", async () => {
    const res = await openai().responses.create({
      ...greedy,
      input: "Tell me a story.",
      max_output_tokens: 3,
    });
    expect(res.status).toBe("incomplete");
    expect(res.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(res.usage?.output_tokens).toBe(3);
  });

  it("streamed: Responses events in OpenAI's order, the client's final response the one not streamed", async () => {
    const ask = { ...greedy, input: "What is the moon made of?", max_output_tokens: 32 };
    const whole = await openai().responses.create(ask);
    const stream = openai().responses.stream(ask);
    const types: string[] = [];
    const sequence: number[] = [];
    let deltas = "";
    let last: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      sequence.push(event.sequence_number);
      if (event.type === "response.output_text.delta") deltas += event.delta;
      if (event.type === "response.completed" || event.type === "response.incomplete")
        last = event.response;
    }
    // the client's snapshot, built from the events (it adds no output_text to a streamed one)
    const final = await stream.finalResponse();
    const snapshotText = final.output
      .flatMap((item) => (item.type === "message" ? item.content : []))
      .map((part) => (part.type === "output_text" ? part.text : ""))
      .join("");
    expect(snapshotText).toBe(whole.output_text);
    expect(deltas).toBe(whole.output_text);
    expect(last?.status).toBe(whole.status);
    // (the same prompt again: its prefix may come from the worker's cache, cached_tokens aside)
    expect(last?.usage?.input_tokens).toBe(whole.usage?.input_tokens);
    expect(last?.usage?.output_tokens).toBe(whole.usage?.output_tokens);
    expect(sequence).toEqual(types.map((_, k) => k));
    const end = whole.status === "incomplete" ? "response.incomplete" : "response.completed";
    const opening = [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ];
    const closing = [
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      end,
    ];
    expect(types.slice(0, 4)).toEqual(opening);
    expect(types.slice(-4)).toEqual(closing);
    expect(new Set(types.slice(4, -4))).toEqual(new Set(["response.output_text.delta"]));
  });

  it("previous_response_id continues the conversation (the earlier answer as the assistant's turn); a stored response reads back", async () => {
    const first = await openai().responses.create({
      ...greedy,
      input: "Name a fruit.",
      max_output_tokens: 12,
    });
    const second = await openai().responses.create({
      ...greedy,
      previous_response_id: first.id,
      input: [{ role: "user", content: "And a colour?" }],
      max_output_tokens: 12,
    });
    const chat = await chatOf(
      [
        { role: "user", content: "Name a fruit." },
        { role: "assistant", content: first.output_text },
        { role: "user", content: "And a colour?" },
      ],
      12,
    );
    expect(second.output_text).toBe(chat.text);
    expect(second.usage?.input_tokens).toBe(chat.promptTokens);
    expect(second.previous_response_id).toBe(first.id);
    const read = await openai().responses.retrieve(second.id);
    expect(read.output_text).toBe(second.output_text);
    expect(read.status).toBe(second.status);
    expect(read.usage).toEqual(second.usage);
  });

  it("input_items lists the conversation a response was given, paged as the client pages it", async () => {
    const first = await openai().responses.create({
      ...greedy,
      instructions: "Be brief.",
      input: "Name a tree.",
      max_output_tokens: 8,
    });
    const second = await openai().responses.create({
      ...greedy,
      previous_response_id: first.id,
      input: "And a bird?",
      max_output_tokens: 8,
    });
    const texts = (items: OpenAI.Responses.ResponseItem[]) =>
      items.map((item) =>
        item.type === "message"
          ? `${item.role}: ${item.content.map((part) => ("text" in part ? part.text : "")).join("")}`
          : item.type,
      );
    const conversation = [
      "user: Name a tree.",
      `assistant: ${first.output_text}`,
      "user: And a bird?",
    ];
    // the client follows `has_more` and `after` a page of one at a time; newest first by default
    const newestFirst: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of openai().responses.inputItems.list(second.id, { limit: 1 }))
      newestFirst.push(item);
    expect(texts(newestFirst)).toEqual([...conversation].reverse());
    const page = await openai().responses.inputItems.list(second.id, { order: "asc", limit: 2 });
    expect(texts(page.data)).toEqual(conversation.slice(0, 2));
    expect(page.has_more).toBe(true);
    const rest = await openai().responses.inputItems.list(second.id, {
      order: "asc",
      after: page.data[1]?.id ?? "",
    });
    expect(texts(rest.data)).toEqual(conversation.slice(2));
    expect(rest.has_more).toBe(false);
    // the instructions are not an input item; the first response lists its own input only
    expect(texts((await openai().responses.inputItems.list(first.id)).data)).toEqual([
      "user: Name a tree.",
    ]);
    await expect(
      openai().responses.inputItems.list(second.id, { after: "msg_nope" }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it("a deleted response reads as unknown, cannot be continued or listed; deleting it twice is a 404", async () => {
    const res = await openai().responses.create({ ...greedy, input: "Hi", max_output_tokens: 2 });
    expect(await openai().responses.retrieve(res.id)).toMatchObject({ id: res.id });
    const deleted = await fetch(stack.url(`/v1/responses/${res.id}`), { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ id: res.id, object: "response", deleted: true });
    await expect(openai().responses.retrieve(res.id)).rejects.toMatchObject({ status: 404 });
    await expect(openai().responses.inputItems.list(res.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      openai().responses.create({ ...greedy, input: "Again", previous_response_id: res.id }),
    ).rejects.toMatchObject({ status: 404 });
    // the client's own call, on a second response; the job behind a response goes with it
    const other = await openai().responses.create({ ...greedy, input: "Yo", max_output_tokens: 2 });
    await openai().responses.delete(other.id);
    expect((await fetch(stack.url(`/v1/jobs/${other.id.slice("resp_".length)}`))).status).toBe(404);
    await expect(openai().responses.delete(other.id)).rejects.toMatchObject({ status: 404 });
  });

  it("store: false cannot be read back or continued; an unknown id is a 404", async () => {
    const unstored = await openai().responses.create({
      ...greedy,
      input: "Hi",
      max_output_tokens: 4,
      store: false,
    });
    for (const id of [unstored.id, "resp_nope", "nope"]) {
      await expect(openai().responses.retrieve(id)).rejects.toMatchObject({ status: 404 });
      await expect(
        openai().responses.create({ ...greedy, input: "Again", previous_response_id: id }),
      ).rejects.toMatchObject({ status: 404 });
    }
  });

  it("structured outputs: the client's zod text format parses the answer", async () => {
    const Verdict = z.object({ answer: z.enum(["yes", "no"]), sure: z.boolean() });
    const res = await openai().responses.parse({
      model: "tiny-lm",
      input: "Is the sky blue? Answer in JSON.",
      text: { format: zodTextFormat(Verdict, "verdict") },
      max_output_tokens: 60,
    });
    expect(Verdict.parse(res.output_parsed)).toEqual(res.output_parsed);
  });

  it("refuses by name what it would otherwise get wrong", async () => {
    const refused = async (body: Record<string, unknown>, message: RegExp) => {
      const res = await stack.post("/v1/responses", { model: "tiny-lm", input: "Hi", ...body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
    };
    await refused(
      { tools: [{ type: "web_search" }] },
      /tools of type web_search are not supported/,
    );
    await refused({ background: true, store: false }, /background mode needs store: true/);
    await refused({ reasoning: { effort: "high" } }, /^reasoning: /);
    // as on the chat and completion routes: stream_options come with a stream
    await refused(
      { stream_options: { include_obfuscation: false } },
      /Stream options can only be defined when `stream=True`/,
    );
    await refused(
      { input: [{ type: "reasoning", summary: [] }] },
      /input items of type reasoning are not supported/,
    );
    await refused(
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
      /content of type input_image is not supported/,
    );
    // a conversation's ids have budgets, and count against the window as its text does: a
    // continued response stores the whole conversation again
    const output = (callId: string) => ({
      type: "function_call_output",
      call_id: callId,
      output: "x",
    });
    await refused({ input: [output("c".repeat(257))] }, /call_id: Too big/i);
    await refused(
      { input: Array.from({ length: 70 }, (_, k) => output(`${k}`.padEnd(256, "c"))) },
      /maximum context length is 256 tokens/,
    );
    // their no-op values pass
    const fine = await stack.post("/v1/responses", {
      model: "tiny-lm",
      input: "Hi",
      max_output_tokens: 2,
      tools: [],
      background: false,
      truncation: "disabled",
      include: [],
      top_logprobs: 0,
      reasoning: { effort: null },
      stream_options: {},
    });
    expect(fine.status).toBe(200);
  });
});

describe("background responses (an async job each)", () => {
  it("answered at once, queued; read back until completed, the answer of the same response in the foreground", async () => {
    const ask = { ...greedy, input: "What is rain?", max_output_tokens: 20 };
    const foreground = await openai().responses.create(ask);
    const queued = await openai().responses.create({ ...ask, background: true });
    expect(queued.background).toBe(true);
    expect(["queued", "in_progress"]).toContain(queued.status);
    expect(queued.output).toEqual([]);
    let read = queued;
    for (let k = 0; k < 100 && (read.status === "queued" || read.status === "in_progress"); k++) {
      await new Promise((r) => setTimeout(r, 50));
      read = await openai().responses.retrieve(queued.id);
    }
    expect(read.status).toBe(foreground.status);
    expect(read.output_text).toBe(foreground.output_text);
    expect(read.background).toBe(true);
  });

  it("streamed: OpenAI's events from queued to completed; read again, whole or from starting_after, the same events", async () => {
    const ask = { ...greedy, input: "What is snow?", max_output_tokens: 16 };
    const foreground = await openai().responses.create(ask);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await openai().responses.create({
      ...ask,
      background: true,
      stream: true,
    }))
      events.push(event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.slice(0, 3).map((e) => e.type)).toEqual([
      "response.created",
      "response.queued",
      "response.in_progress",
    ]);
    const created = events[0];
    if (created?.type !== "response.created") throw new Error("expected response.created");
    expect(created.response.status).toBe("queued");
    expect(created.response.background).toBe(true);
    const text = events
      .map((e) => (e.type === "response.output_text.delta" ? e.delta : ""))
      .join("");
    expect(text).toBe(foreground.output_text);
    expect(events.at(-1)?.type).toBe(
      foreground.status === "incomplete" ? "response.incomplete" : "response.completed",
    );
    // the same events, numbered the same, from after the fifth: what a client resuming gets
    const rest: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await openai().responses.retrieve(created.response.id, {
      stream: true,
      starting_after: 4,
    }))
      rest.push(event);
    expect(rest).toEqual(events.slice(5));
    // the client's ResponseStream resuming by id builds the response from the whole stream
    const resumed = await openai()
      .responses.stream({ response_id: created.response.id })
      .finalResponse();
    expect(
      resumed.output
        .flatMap((item) => (item.type === "message" ? item.content : []))
        .map((part) => (part.type === "output_text" ? part.text : ""))
        .join(""),
    ).toBe(foreground.output_text);
    // only a background response is kept to be streamed again
    await expect(
      openai().responses.retrieve(foreground.id, { stream: true }),
    ).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/not created with background=true/),
    });
  });

  it("streamed while queued: a client that leaves does not cancel it; a cancel ends the stream", async () => {
    const client = new OpenAI({ baseURL: idle.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const ask = { ...greedy, input: "Hi", background: true, stream: true } as const;
    const left = await client.responses.create(ask);
    const seen: string[] = [];
    let id = "";
    for await (const event of left) {
      seen.push(event.type);
      if (event.type === "response.created") id = event.response.id;
      if (event.type === "response.queued") break;
    }
    expect(seen).toEqual(["response.created", "response.queued"]);
    await new Promise((r) => setTimeout(r, 200));
    expect((await client.responses.retrieve(id)).status).toBe("queued");
    // read again while queued, then cancelled: the stream ends, saying so
    const read = await client.responses.retrieve(id, { stream: true });
    const types: string[] = [];
    let last: OpenAI.Responses.ResponseStreamEvent | undefined;
    const reading = (async () => {
      for await (const event of read) {
        types.push(event.type);
        last = event;
        if (event.type === "response.queued") await client.responses.cancel(id);
      }
    })();
    await reading;
    expect(types).toEqual(["response.created", "response.queued", "error", "response.failed"]);
    expect(last?.type === "response.failed" && last.response.status).toBe("cancelled");
  });

  it("cancelled while queued, it never runs; a response in the foreground cannot be cancelled", async () => {
    const client = new OpenAI({ baseURL: idle.url("/v1"), apiKey: "unused", maxRetries: 0 });
    const queued = await client.responses.create({ ...greedy, input: "Hi", background: true });
    expect(queued.status).toBe("queued");
    const cancelled = await client.responses.cancel(queued.id);
    expect(cancelled.status).toBe("cancelled");
    expect((await client.responses.retrieve(queued.id)).status).toBe("cancelled");
    // deleted while queued: it is cancelled (never runs) and reads as unknown
    const doomed = await client.responses.create({ ...greedy, input: "Bye", background: true });
    await client.responses.delete(doomed.id);
    await expect(client.responses.retrieve(doomed.id)).rejects.toMatchObject({ status: 404 });
    expect((await fetch(idle.url(`/v1/jobs/${doomed.id.slice("resp_".length)}`))).status).toBe(404);
    const done = await openai().responses.create({ ...greedy, input: "Hi", max_output_tokens: 2 });
    await expect(openai().responses.cancel(done.id)).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(
        /Only responses created with background=true can be cancelled/,
      ),
    });
  });
});

describe("function tools in the Responses API", () => {
  const Args = WeatherArgs;
  const weather = flat(chatWeather, true);
  const time = flat(chatTime);
  const ask = "Weather in Oslo?";

  it("a forced call is a function_call item, the chat's call; streamed, its arguments come as deltas", async () => {
    const forced = {
      ...greedy,
      input: ask,
      tools: [weather, time],
      tool_choice: { type: "function" as const, name: "get_weather" },
    };
    const res = await openai().responses.create(forced);
    expect(res.output).toHaveLength(1);
    const call = res.output[0];
    if (call?.type !== "function_call")
      throw new Error(`expected a function_call, got ${call?.type}`);
    expect(call.name).toBe("get_weather");
    expect(Args.parse(JSON.parse(call.arguments))).toEqual(JSON.parse(call.arguments));
    const chat = await openai().chat.completions.create({
      ...greedy,
      messages: [{ role: "user", content: ask }],
      tools: [chatWeather],
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const chatCall = chat.choices[0]?.message.tool_calls?.[0];
    expect(chatCall?.type === "function" && chatCall.function.arguments).toBe(call.arguments);
    expect(res.tools).toHaveLength(2);
    const stream = openai().responses.stream(forced);
    const types: string[] = [];
    let deltas = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.function_call_arguments.delta") deltas += event.delta;
    }
    expect(types.slice(0, 3)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
    ]);
    expect(types.slice(-3)).toEqual([
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(
      types.filter((t) => t === "response.function_call_arguments.delta").length,
    ).toBeGreaterThan(1);
    expect(deltas).toBe(call.arguments);
    const final = await stream.finalResponse();
    // another response: its own call id, the same call
    expect(final.output).toMatchObject([
      {
        type: "function_call",
        name: "get_weather",
        arguments: call.arguments,
        status: "completed",
      },
    ]);
  });

  it("the call's output goes back as a function_call_output item: the next answer is the chat's with the call and the tool's message in it", async () => {
    const first = await openai().responses.create({
      ...greedy,
      input: ask,
      tools: [weather],
      tool_choice: "required",
    });
    const call = first.output[0];
    if (call?.type !== "function_call") throw new Error("expected a function_call");
    const next = await openai().responses.create({
      ...greedy,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "Sunny, 21 C" }],
      tools: [weather],
      tool_choice: "none",
      max_output_tokens: 12,
    });
    const chat = await openai().chat.completions.create({
      ...greedy,
      max_tokens: 12,
      messages: [
        { role: "user", content: ask },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: call.call_id,
              type: "function",
              function: { name: call.name, arguments: call.arguments },
            },
          ],
        },
        { role: "tool", tool_call_id: call.call_id, content: "Sunny, 21 C" },
      ],
    });
    expect(next.output_text).toBe(chat.choices[0]?.message.content);
    expect(next.usage?.input_tokens).toBe(chat.usage?.prompt_tokens);
    // its input items: the question, the earlier response's call (its item id) and the output
    const items = await openai().responses.inputItems.list(next.id, { order: "asc" });
    expect(items.data.map((item) => item.type)).toEqual([
      "message",
      "function_call",
      "function_call_output",
    ]);
    expect(items.data[1]).toMatchObject({
      id: call.id,
      call_id: call.call_id,
      name: call.name,
      arguments: call.arguments,
    });
    expect(items.data[2]).toMatchObject({ call_id: call.call_id, output: "Sunny, 21 C" });
    // the same turn sent whole, without previous_response_id: the same answer
    const whole = await openai().responses.create({
      ...greedy,
      input: [
        { role: "user", content: ask },
        {
          type: "function_call",
          call_id: call.call_id,
          name: call.name,
          arguments: call.arguments,
        },
        { type: "function_call_output", call_id: call.call_id, output: "Sunny, 21 C" },
      ],
      max_output_tokens: 12,
    });
    expect(whole.output_text).toBe(next.output_text);
  });

  it('tool_choice "auto" (a model with a call parser): text alone is a message, streamed as it comes', async () => {
    const auto = { ...greedy, input: "Say hello.", tools: [weather], max_output_tokens: 16 };
    const res = await openai().responses.create(auto);
    expect(res.output.map((item) => item.type)).toEqual(["message"]);
    const stream = openai().responses.stream(auto);
    const types: string[] = [];
    let deltas = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") deltas += event.delta;
    }
    expect(deltas).toBe(res.output_text);
    expect(types.slice(2, 4)).toEqual([
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      res.status === "incomplete" ? "response.incomplete" : "response.completed",
    ]);
    const middle = types.slice(4, -4);
    expect(new Set(middle)).toEqual(new Set(["response.output_text.delta"]));
    expect(middle.length).toBeGreaterThan(1);
  });
});

describe("OpenAI's Responses API, through Vercel's AI SDK (@ai-sdk/openai's responses model)", () => {
  it("generateText and streamText answer as the openai client's response", async () => {
    const ask = {
      ...greedy,
      instructions: "Answer briefly.",
      input: "Why do cats purr?",
      max_output_tokens: 20,
    };
    const reference = await openai().responses.create(ask);
    const model = createOpenAI({ baseURL: stack.url("/v1"), apiKey: "unused" }).responses(
      "tiny-lm",
    );
    const options = {
      model,
      system: "Answer briefly.",
      prompt: "Why do cats purr?",
      maxOutputTokens: 20,
      temperature: 0,
      maxRetries: 0,
    };
    const generated = await generateText(options);
    expect(generated.text).toBe(reference.output_text);
    expect(generated.usage.inputTokens).toBe(reference.usage?.input_tokens);
    expect(generated.finishReason).toBe(reference.status === "incomplete" ? "length" : "stop");
    const streamed = streamText(options);
    let text = "";
    for await (const delta of streamed.textStream) text += delta;
    expect(text).toBe(reference.output_text);
    expect((await streamed.usage).outputTokens).toBe(reference.usage?.output_tokens);
  });
});

describe("OpenAI's Responses API, through LangChain.js (ChatOpenAI with useResponsesApi)", () => {
  it("invoke and stream answer as the openai client's response", async () => {
    const reference = await openai().responses.create({
      ...greedy,
      instructions: "Answer briefly.",
      input: "Where do penguins live?",
      max_output_tokens: 20,
    });
    const model = new ChatOpenAI({
      model: "tiny-lm",
      apiKey: "unused",
      temperature: 0,
      maxTokens: 20,
      useResponsesApi: true,
      maxRetries: 0,
      configuration: { baseURL: stack.url("/v1") },
    });
    const messages = [
      new SystemMessage("Answer briefly."),
      new HumanMessage("Where do penguins live?"),
    ];
    const answer = await model.invoke(messages);
    expect(answer.text).toBe(reference.output_text);
    const usage = answer.usage_metadata as { input_tokens?: number } | undefined;
    expect(usage?.input_tokens).toBe(reference.usage?.input_tokens);
    let streamed = "";
    for await (const chunk of await model.stream(messages)) streamed += chunk.text;
    expect(streamed).toBe(reference.output_text);
  });
});

describe("how long a completion's job is kept once done", () => {
  it("a sync chat's for resuming (SYNC_JOB_TTL_S), an async job's and a stored response's as jobs are (JOB_TTL_S)", async () => {
    const redis = createRedis(REDIS_TARGET);
    const keys = new Keys(stack.prefix);
    const ttlOf = async (jobId: string) => ({
      index: await redis.ttl(keys.jobQueue(jobId)),
      log: await redis.ttl(keys.events({ queue: "tiny-lm.v1", id: jobId })),
    });
    try {
      const streamed = await stack.post("/v1/chat/completions", {
        ...greedy,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 3,
        stream: true,
      });
      await streamed.text();
      const chatJob = streamed.headers.get("x-job-id") ?? "";
      const sync = await ttlOf(chatJob);
      expect(sync.log).toBeGreaterThan(3_500);
      expect(sync.log).toBeLessThanOrEqual(3_600);
      expect(sync.index).toBeGreaterThan(3_500);
      // (the index also covers the wait before the deadline: the model's default timeout)
      expect(sync.index).toBeLessThan(3_600 + 3_600);
      // still resumable in that time
      expect((await fetch(stack.url(`/v1/jobs/${chatJob}/events`))).status).toBe(200);

      const submitted = await stack.post("/v1/jobs", {
        model: "tiny-lm",
        input: { prompt: "Hi", max_tokens: 3 },
      });
      const { id: asyncJob } = (await submitted.json()) as { id: string };
      await waitFor(async () => (await ttlOf(asyncJob)).log > 0, 10_000);
      for (const ttl of Object.values(await ttlOf(asyncJob))) expect(ttl).toBeGreaterThan(86_000);

      const stored = await openai().responses.create({
        ...greedy,
        input: "Hi",
        max_output_tokens: 3,
      });
      const unstored = await openai().responses.create({
        ...greedy,
        input: "Hi",
        max_output_tokens: 3,
        store: false,
      });
      expect((await ttlOf(stored.id.slice("resp_".length))).log).toBeGreaterThan(86_000);
      expect((await ttlOf(unstored.id.slice("resp_".length))).log).toBeLessThanOrEqual(3_600);
    } finally {
      redis.disconnect();
    }
  });
});
