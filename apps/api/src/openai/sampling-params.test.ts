import { describe, expect, it } from "vitest";
import { type AsCompletion, samplingParamsOf } from "./sampling-params.js";
import { completionRequestSchema } from "./schemas.js";

/** A completion body as the API parses it, then translated for a 257-token model. */
function translate(body: Record<string, unknown>, extra: Partial<AsCompletion> = {}) {
  const parsed = completionRequestSchema.parse({ model: "m", prompt: "Q:", ...body });
  return samplingParamsOf(
    { ...parsed, format: "completion", ...extra },
    { maxTokens: 16, special: false, vocabSize: 257 },
  );
}

describe("samplingParamsOf (OpenAI to the engine)", () => {
  it("fills OpenAI's defaults and lists stop strings", () => {
    const { params } = translate({ stop: "\n" });
    expect(params).toEqual({
      max_tokens: 16,
      temperature: 1,
      top_p: 1,
      top_k: 0,
      ignore_eos: false,
      stop: ["\n"],
    });
    expect(translate({ seed: 3, temperature: 0 }).params).toMatchObject({
      seed: 3,
      temperature: 0,
    });
  });

  it("passes vLLM's extras only when given, and asks for prompt scores once", () => {
    const { params, ask } = translate({
      min_p: 0.1,
      repetition_penalty: 1.2,
      echo: true,
      logprobs: 2,
      prompt_logprobs: 3,
    });
    expect(params).toMatchObject({ min_p: 0.1, repetition_penalty: 1.2, echo: true, logprobs: 2 });
    expect(params.prompt_logprobs).toBe(3);
    expect(ask).toEqual({ echo_logprobs: 2, prompt_logprobs: 3 });
    expect(translate({}).params).not.toHaveProperty("min_p");
  });

  it("resolves guided decoding to one kind, from any of its spellings", () => {
    expect(translate({ guided_choice: ["a", "b"] }).params.guided_choice).toEqual(["a", "b"]);
    expect(translate({ structured_outputs: { regex: "[0-9]+" } }).params.guided_regex).toBe(
      "[0-9]+",
    );
    expect(translate({ response_format: { type: "json_object" } }).params.json_object).toBe(true);
    const schema = { type: "object", properties: { a: { type: "integer" } } };
    expect(
      translate({ response_format: { type: "json_schema", json_schema: { name: "x", schema } } })
        .params.json_schema,
    ).toEqual(schema);
    expect(translate({ guided_grammar: 'root ::= "x"' }).params.guided_grammar).toBe(
      'root ::= "x"',
    );
    expect(() => translate({ guided_choice: ["a"], guided_regex: "a" })).toThrow(
      "give one of guided_choice, guided_regex, not several",
    );
    expect(() => translate({ guided_choice: ["a"], min_tokens: 2 })).toThrow(/min_tokens/);
  });

  it("checks a guided spec within its budgets before anything is queued", () => {
    expect(() => translate({ guided_json: { type: "object", not: {} } })).toThrow(
      "guided_json: at /not: keyword 'not' is not supported",
    );
    expect(() => translate({ guided_regex: "(a{1000}){1000}" })).toThrow(/writes out to 1000000/);
  });

  it("a forced tool call is guided by its parameters; auto on a Hermes model by structural tags", () => {
    const parameters = { type: "object", properties: { city: { type: "string" } } };
    const forced = translate(
      {},
      { toolCall: { schema: parameters, ask: { tool_call: "named", name: "w" } } },
    );
    expect(forced.params.json_schema).toEqual(parameters);
    const calls = { format: "hermes" as const, tools: [{ name: "w", parameters }] };
    const auto = translate(
      {},
      { toolCall: { calls, ask: { tool_call: "auto", parser: "hermes" } } },
    );
    expect(auto.params.tool_calls_guide).toEqual(calls);
    // the client's own guide wins over the tools'
    const own = translate(
      { guided_regex: "x" },
      { toolCall: { calls, ask: { tool_call: "auto", parser: "hermes" } } },
    );
    expect(own.params).not.toHaveProperty("tool_calls_guide");
  });

  it("token ids must be in the vocabulary; allowed_token_ids travel once each", () => {
    expect(() => translate({ logit_bias: { "300": 1 } })).toThrow(
      "logit_bias: token id 300 is out of vocabulary (this model has 257 tokens)",
    );
    // each id once, in its plain form: "1", "01", "001" are one token, named once
    expect(translate({ logit_bias: { "007": 5, "0": -1 } }).params.logit_bias).toEqual({
      "7": 5,
      "0": -1,
    });
    expect(() => translate({ logit_bias: { "1": 1, "01": 1 } })).toThrow(
      'logit_bias names token id 1 twice ("01")',
    );
    const spelled = Object.fromEntries(
      Array.from({ length: 301 }, (_, i) => [`${"0".repeat(i)}1`, 1]),
    );
    expect(() => translate({ logit_bias: spelled })).toThrow(
      "logit_bias names 301 token ids; at most 300",
    );
    expect(() => translate({ logit_bias: { ["1".repeat(400)]: 1 } })).toThrow(/is no token id/);
    const ids = Array.from({ length: 1_000 }, (_, i) => i % 3);
    expect(translate({ allowed_token_ids: ids }).params.allowed_token_ids).toEqual([0, 1, 2]);
    expect(() => translate({ min_tokens: 20 })).toThrow(
      "min_tokens (20) must be at most max_tokens (16)",
    );
  });
});
