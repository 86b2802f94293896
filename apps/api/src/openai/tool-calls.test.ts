import { describe, expect, it } from "vitest";
import { chatAnswerOf, toolChoice } from "./tool-calls.js";

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
