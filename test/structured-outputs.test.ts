import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject, generateText, Output, tool } from "ai";
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

// Issue 43's eight cases, each through a real client unchanged: the schemas TypeScript teams
// write with zod (bounded numbers, nested objects, arrays of objects, enums, optional fields,
// recursion), answered by tiny-lm under XGrammar and parsed by the client's own checks.
const repo = tempRepository({ "tiny-lm": {} });
const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } });
beforeAll(() => stack.start());
afterAll(() => stack.stop());

const openai = () => new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
const sdk = () =>
  createOpenAICompatible({
    name: "ferry",
    baseURL: stack.url("/v1"),
    supportsStructuredOutputs: true,
  }).chatModel("tiny-lm");
const langchain = () =>
  new ChatOpenAI({
    model: "tiny-lm",
    apiKey: "unused",
    configuration: { baseURL: stack.url("/v1") },
  });

const Person = z.object({
  name: z.string().max(20),
  age: z.number().int().min(0).max(120),
  // bounded floats and a wide integer range: spelled exactly, never refused
  score: z.number().min(0).max(1),
  address: z.object({
    city: z.string().max(12),
    zip: z.string().regex(/^[0-9]{5}$/),
    latitude: z.number().min(-90).max(90),
    population: z.number().int().min(-1).max(10_000_000),
  }),
  pets: z
    .array(z.object({ kind: z.enum(["cat", "dog", "fish"]), age: z.number().int().min(0).max(30) }))
    .max(2),
  nickname: z.string().max(10).optional(),
});
// the openai helper requires every field, an optional one written as nullable (OpenAI's rule)
const OpenAIPerson = Person.extend({ nickname: z.string().max(10).nullable() });
type Tree = { value: number; children: Tree[] };
const Tree: z.ZodType<Tree> = z.object({
  value: z.number().int().min(0).max(9),
  children: z.lazy(() => z.array(Tree).max(2)),
});
const Weather = z.object({ city: z.string().max(16), unit: z.enum(["c", "f"]) });

describe("structured outputs through real clients, unchanged", () => {
  it("openai chat.completions.parse + zodResponseFormat: bounded numbers, nested objects, arrays of objects, enums, optional fields", async () => {
    for (const seed of [1, 2, 3]) {
      const res = await openai().chat.completions.parse({
        model: "tiny-lm",
        messages: [{ role: "user", content: "Describe a person as JSON." }],
        seed,
        temperature: 0.7,
        response_format: zodResponseFormat(OpenAIPerson, "person"),
      });
      const parsed = res.choices[0]?.message.parsed;
      expect(res.choices[0]?.finish_reason).toBe("stop");
      expect(OpenAIPerson.parse(parsed)).toEqual(parsed);
    }
  });

  it("openai chat.completions.parse + zodResponseFormat: a recursive z.lazy tree", async () => {
    const res = await openai().chat.completions.parse({
      model: "tiny-lm",
      messages: [{ role: "user", content: "A small tree." }],
      seed: 4,
      temperature: 0.7,
      response_format: zodResponseFormat(Tree, "tree"),
    });
    const parsed = res.choices[0]?.message.parsed;
    expect(Tree.parse(parsed)).toEqual(parsed);
  });

  it("openai responses.parse with text.format", async () => {
    const res = await openai().responses.parse({
      model: "tiny-lm",
      input: "Describe a person as JSON.",
      text: { format: zodTextFormat(OpenAIPerson, "person") },
    });
    expect(OpenAIPerson.parse(res.output_parsed)).toEqual(res.output_parsed);
  });

  it("AI SDK generateObject, and generateText with output", async () => {
    const object = await generateObject({
      model: sdk(),
      schema: Person,
      prompt: "A person.",
      seed: 5,
    });
    expect(Person.parse(object.object)).toEqual(object.object);
    const text = await generateText({
      model: sdk(),
      output: Output.object({ schema: Person }),
      prompt: "A person.",
      seed: 6,
    });
    expect(Person.parse(text.output)).toEqual(text.output);
  });

  it("AI SDK generateText with a forced tool", async () => {
    const res = await generateText({
      model: sdk(),
      tools: { get_weather: tool({ description: "the weather in a city", inputSchema: Weather }) },
      toolChoice: { type: "tool", toolName: "get_weather" },
      prompt: "Weather in Oslo?",
      seed: 7,
    });
    expect(res.toolCalls.map((c) => c.toolName)).toEqual(["get_weather"]);
    expect(Weather.parse(res.toolCalls[0]?.input)).toEqual(res.toolCalls[0]?.input);
  });

  it("LangChain withStructuredOutput (jsonSchema and functionCalling) and bindTools", async () => {
    for (const method of ["jsonSchema", "functionCalling"] as const) {
      const person = await langchain().withStructuredOutput(Person, { method }).invoke("A person.");
      expect(Person.parse(person)).toEqual(person);
    }
    const bound = langchain().bindTools(
      [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "the weather",
            parameters: z.toJSONSchema(Weather),
          },
        },
      ],
      { tool_choice: { type: "function", function: { name: "get_weather" } } },
    );
    const message = await bound.invoke("Weather in Oslo?");
    expect(message.tool_calls?.map((c) => c.name)).toEqual(["get_weather"]);
    expect(Weather.parse(message.tool_calls?.[0]?.args)).toEqual(message.tool_calls?.[0]?.args);
  });
});
