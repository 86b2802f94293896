import { describe, expect, it } from "vitest";
import { type ChatAnswer, HermesStream, hermesAnswer, toolChoice } from "./tool-calls.js";

const weather = '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}';
const time = '{"name": "get_time", "arguments": {}}';

/** A streamed answer's pieces put together: the content, and the calls in order. */
function streamed(pieces: string[]): ChatAnswer {
  const reader = new HermesStream("j1");
  let content = "";
  const calls: ChatAnswer["calls"] = [];
  for (const out of [...pieces.map((p) => reader.push(p)), reader.end()]) {
    content += out.content ?? "";
    calls.push(...out.calls);
  }
  return { content: content || null, calls };
}

describe("Hermes tool calls (vLLM's hermes parser)", () => {
  it("reads the calls of a whole answer, the content being the text before the first", () => {
    expect(hermesAnswer("It is sunny.", "j1")).toEqual({ content: "It is sunny.", calls: [] });
    const one = hermesAnswer(`Let me look.\n<tool_call>\n${weather}\n</tool_call>`, "j1");
    expect(one.content).toBe("Let me look.\n");
    expect(one.calls).toEqual([
      {
        id: "call_j1",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"celsius"}' },
      },
    ]);
    // several calls (text between them is not content), the last left open by the end
    const two = hermesAnswer(`<tool_call>${weather}</tool_call>\nand <tool_call>\n${time}`, "j1");
    expect(two.content).toBeNull();
    expect(two.calls.map((c) => [c.id, c.function.name, c.function.arguments])).toEqual([
      ["call_j1", "get_weather", '{"city":"Oslo","unit":"celsius"}'],
      ["call_j1_1", "get_time", "{}"],
    ]);
    // a call that does not parse: the whole text is the content, as vLLM answers it
    const broken = `Sure <tool_call>{"name": "get_weather", "argu</tool_call>`;
    expect(hermesAnswer(broken, "j1")).toEqual({ content: broken, calls: [] });
    expect(hermesAnswer("<tool_call>[1, 2]</tool_call>", "j1").calls).toEqual([]);
  });

  it("streamed in pieces of any size, gives what the whole answer gives, holding back only what may begin a tag", () => {
    const texts = [
      "It is sunny, a < b and <tool is not a tag.",
      `Let me look.\n<tool_call>\n${weather}\n</tool_call>`,
      `<tool_call>${weather}</tool_call>\n<tool_call>${time}</tool_call>`,
      `Checking <tool_call>${time}`,
      "ends with a partial tag <tool_ca",
    ];
    for (const text of texts) {
      const whole = hermesAnswer(text, "j1");
      for (const size of [1, 2, 3, 7, 11, text.length]) {
        const pieces = Array.from({ length: Math.ceil(text.length / size) }, (_, k) =>
          text.slice(k * size, (k + 1) * size),
        );
        expect(streamed(pieces), `${JSON.stringify(text)} in pieces of ${size}`).toEqual(whole);
      }
    }
    // text that cannot begin a tag goes out at once; "<to" waits for what follows
    const reader = new HermesStream("j1");
    expect(reader.push("Hi <").content).toBe("Hi ");
    expect(reader.push("to").content).toBe("");
    expect(reader.push("o late").content).toBe("<too late");
    expect(reader.called).toBe(false);
  });

  it("a call that does not parse goes out as text in a stream", () => {
    const text = 'Sure <tool_call>{"name": 1}</tool_call> done';
    expect(streamed([text])).toEqual({ content: text, calls: [] });
  });
});

describe("tool_choice", () => {
  const tools = [{ type: "function" as const, function: { name: "get_time" } }];

  it('"auto" (or tools without a choice) reads the model\'s calls where model.json names a parser, and is a 400 naming it where not', () => {
    expect(toolChoice({ tools, tool_choice: "auto" }, "hermes")).toEqual({
      ask: { tool_call: "auto", parser: "hermes" },
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
});
