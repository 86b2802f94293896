import { guidedProblem } from "@ferry/guided";
import { describe, expect, it } from "vitest";
import { functionParametersSchema } from "./schemas.js";
import { chatAnswerOf, streamedCallsOf, toolChoice } from "./tool-calls.js";

describe("tool_choice", () => {
  const tools = [{ type: "function" as const, function: { name: "get_time" } }];

  it('"auto" (or tools without a choice) reads the model\'s calls where model.json names a parser, and is a 400 naming it where not', () => {
    // a Hermes model's calls are guided by their tools' parameters (XGrammar's structural tags)
    expect(toolChoice({ tools, tool_choice: "auto" }, "hermes")).toEqual({
      ask: { tool_call: "auto", parser: "hermes" },
      calls: {
        format: "hermes",
        tools: [{ name: "get_time", parameters: { type: "object", properties: {} } }],
      },
    });
    expect(toolChoice({ tools, tool_choice: "auto" }, "llama3_json")).toEqual({
      ask: { tool_call: "auto", parser: "llama3_json" },
    });
    expect(toolChoice({ tools }, "hermes")?.ask).toEqual({ tool_call: "auto", parser: "hermes" });
    expect(() => toolChoice({ tools }, undefined)).toThrow(/tool_call_parser/);
    // a forced call is guided, whatever the parser
    expect(toolChoice({ tools, tool_choice: "required" }, "hermes")?.ask).toEqual({
      tool_call: "named",
      name: "get_time",
    });
    expect(toolChoice({ tools, tool_choice: "none" }, "hermes")).toBeUndefined();
  });

  it("a call's arguments are an object, whatever the parameters' schema leaves out", () => {
    const withParameters = (parameters: Record<string, unknown>) => [
      { type: "function" as const, function: { name: "f", parameters } },
    ];
    // `{}` had let the model answer a string or a number as the arguments
    expect(
      toolChoice({ tools: withParameters({}), tool_choice: "required" }, "hermes")?.schema,
    ).toEqual({ type: "object" });
    const properties = { a: { type: "integer" } };
    expect(
      toolChoice({ tools: withParameters({ properties }), tool_choice: "required" }, "hermes")
        ?.schema,
    ).toEqual({ properties, type: "object" });
    expect(
      functionParametersSchema.safeParse({ type: "string" }).error?.issues[0]?.message,
    ).toMatch(/JSON schema of an object/);
    expect(functionParametersSchema.safeParse({ type: "object" }).success).toBe(true);
    // nor by a keyword at its root that lets it be something else
    for (const root of [
      { anyOf: [{ type: "string" }] },
      { type: "object", oneOf: [{ type: "integer" }] },
      { $ref: "#/$defs/s", $defs: { s: { type: "string" } } },
      { enum: ["a", 1, null] },
      { const: 42 },
    ])
      expect(functionParametersSchema.safeParse(root).success, JSON.stringify(root)).toBe(false);
  });

  it("\"required\" over several tools keeps each tool's definitions and references (a pydantic model's)", () => {
    const place = {
      type: "object",
      properties: { where: { $ref: "#/$defs/Place" }, near: { $ref: "#/properties/where" } },
      required: ["where"],
      $defs: { Place: { type: "object", properties: { city: { type: "string", maxLength: 20 } } } },
    };
    const tools = [
      { type: "function" as const, function: { name: "go", parameters: place } },
      { type: "function" as const, function: { name: "stay", parameters: place } },
    ];
    const schema = toolChoice({ tools, tool_choice: "required" }, "hermes")?.schema;
    // it had been "$ref #/$defs/Place points at nothing in this schema"
    expect(guidedProblem({ kind: "json_schema", schema: schema ?? {} })).toBeUndefined();
    const { $defs: _defs, ...placeRest } = place;
    expect(schema).toEqual({
      $defs: {
        t0: {
          ...placeRest,
          properties: {
            where: { $ref: "#/$defs/t0_Place" },
            near: { $ref: "#/$defs/t0/properties/where" },
          },
        },
        t0_Place: place.$defs.Place,
        t1: {
          ...placeRest,
          properties: {
            where: { $ref: "#/$defs/t1_Place" },
            near: { $ref: "#/$defs/t1/properties/where" },
          },
        },
        t1_Place: place.$defs.Place,
      },
      anyOf: ["go", "stay"].map((name, k) => ({
        type: "object",
        properties: { name: { const: name }, parameters: { $ref: `#/$defs/t${k}` } },
        required: ["name", "parameters"],
      })),
    });
  });

  it("parallel_tool_calls: false keeps the first call the model wrote", () => {
    const ask = toolChoice({ tools, parallel_tool_calls: false }, "hermes")?.ask;
    expect(ask).toEqual({ tool_call: "auto", parser: "hermes", single: true });
    const call = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>';
    expect(chatAnswerOf(ask, "j1", `${call}\n${call}`).calls.map((c) => c.id)).toEqual(["call_j1"]);
    expect(chatAnswerOf({ ...ask, single: undefined }, "j1", `${call}${call}`).calls).toHaveLength(
      2,
    );
  });
});

describe('tool_choice "required" over several tools, streamed', () => {
  const meta = { tool_call: "required" };
  /** What a stream of `text` in pieces of `size` gives: the name, the arguments, whether called. */
  const streamed = (text: string, size: number) => {
    const reader = streamedCallsOf(meta, "job").reader;
    if (!reader) throw new Error("no reader");
    const parts = [];
    for (let at = 0; at < text.length; at += size)
      parts.push(...reader.push(text.slice(at, at + size)).parts);
    parts.push(...reader.end().parts);
    return {
      id: parts[0]?.id,
      name: parts.map((p) => p.name ?? "").join(""),
      arguments: parts.map((p) => p.arguments).join(""),
      called: reader.called,
    };
  };

  it("gives, in any pieces, the call the whole answer has: its tool's name first, its parameters as written", () => {
    for (const text of [
      '{"name": "get_weather", "parameters": {"city": "Oslo", "unit": {"a": [1, {}]}}}',
      '{"name":"get_time","parameters":{}}',
      '{ "name" : "f" , "parameters" : { "x" : "}}" } }',
      // cut short (length) before the object closed: the text that came
      '{"name": "f", "parameters": {"x": {"y": 1}',
      // before a tool was named: the text, as the whole answer has it
      '{"name": "get_w',
    ]) {
      const [whole] = chatAnswerOf(meta, "job", text).calls;
      for (const size of [1, 2, 3, 7, 1_000]) {
        const got = streamed(text, size);
        expect(got, `${text} in pieces of ${size}`).toEqual({
          id: whole?.id,
          name: whole?.function.name,
          arguments: whole?.function.arguments,
          called: true,
        });
      }
    }
    expect(
      chatAnswerOf(meta, "job", '{"name":"g","parameters":{"a":1}}').calls[0]?.function,
    ).toEqual({
      name: "g",
      arguments: '{"a":1}',
    });
  });

  it("names the call in its first piece and holds only what may close the object", () => {
    const reader = streamedCallsOf(meta, "job").reader;
    expect(reader?.push('{"name": "f", "par').parts).toEqual([]);
    expect(reader?.called).toBe(false);
    expect(reader?.push('ameters": {"x": 1').parts).toEqual([
      { index: 0, id: "call_job", name: "f", arguments: '{"x": 1' },
    ]);
    expect(reader?.push("}").parts).toEqual([]);
    expect(reader?.push("}").parts).toEqual([]);
    expect(reader?.end().parts).toEqual([{ index: 0, arguments: "}", done: true }]);
  });
});
