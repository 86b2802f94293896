import { describe, expect, it } from "vitest";
import {
  type ChatAnswer,
  HermesStream,
  hermesAnswer,
  llama3Answer,
  type ToolCallStream,
  toolCallReader,
} from "./tool-call-parsers.js";

const weather = '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}';
const time = '{"name": "get_time", "arguments": {}}';

/**
 * A streamed answer's pieces put together as a client puts them: the content, and each call
 * from its pieces (named by its first, its arguments joined), in order. Fails on a piece of a
 * call never named, a call named twice, or one never done.
 */
function streamed(pieces: string[], reader: ToolCallStream = new HermesStream("j1")): ChatAnswer {
  let content = "";
  const calls: ChatAnswer["calls"] = [];
  const done = new Set<number>();
  for (const out of [...pieces.map((p) => reader.push(p)), reader.end()]) {
    content += out.content ?? "";
    for (const part of out.parts) {
      if (part.id !== undefined) {
        expect(calls[part.index]).toBeUndefined();
        calls[part.index] = {
          id: part.id,
          type: "function",
          function: { name: part.name ?? "", arguments: "" },
        };
      }
      const call = calls[part.index];
      if (!call) throw new Error(`a piece of call ${part.index}, never named`);
      expect(done.has(part.index)).toBe(false);
      call.function.arguments += part.arguments;
      if (part.done) done.add(part.index);
    }
  }
  expect(done.size).toBe(calls.length);
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
      // escapes, blanks in strings and number forms as the model wrote them, whole or streamed
      '<tool_call>{"name": "f", "arguments": {"q": "caf\\u00e9 \\"a b\\"", "n": 1.50}}</tool_call>',
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

  it("a name-first call's arguments as written (blanks outside strings dropped); another keeps JSON.stringify's form", () => {
    const written = hermesAnswer(
      '<tool_call>{"name": "f", "arguments": {"q": "caf\\u00e9", "n": 1.50}}</tool_call>',
      "j1",
    );
    expect(written.calls[0]?.function.arguments).toBe('{"q":"caf\\u00e9","n":1.50}');
    const reordered = hermesAnswer(
      '<tool_call>{"arguments": {"n": 1.50}, "name": "f"}</tool_call>',
      "j1",
    );
    expect(reordered.calls[0]?.function.arguments).toBe('{"n":1.5}');
  });

  it("streams a call's arguments as they come, named as soon as its head is in (vLLM's)", () => {
    const reader = new HermesStream("j1");
    const text = `<tool_call>\n${weather}\n</tool_call>`;
    const parts = piecesOf(text, 1).flatMap((piece) => reader.push(piece).parts);
    // the name before the arguments, the arguments in many pieces, all before the close tag's end
    expect(parts[0]).toEqual({ index: 0, id: "call_j1", name: "get_weather", arguments: "" });
    const args = parts.filter((p) => p.id === undefined && p.arguments);
    expect(args.length).toBeGreaterThan(10);
    expect(args.map((p) => p.arguments).join("")).toBe('{"city":"Oslo","unit":"celsius"}');
    expect(parts.at(-1)).toEqual({ index: 0, arguments: "", done: true });
    // arguments before the name: read whole at the close tag
    const late = new HermesStream("j1");
    const reversed = '<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>';
    const early = piecesOf(reversed, 1)
      .slice(0, -1)
      .flatMap((piece) => late.push(piece).parts);
    expect(early).toEqual([]);
    expect(late.push(">").parts).toEqual([
      { index: 0, id: "call_j1", name: "f", arguments: '{"a":1}', done: true },
    ]);
  });

  it("a call that does not parse goes out as text in a stream", () => {
    const text = 'Sure <tool_call>{"name": 1}</tool_call> done';
    expect(streamed([text])).toEqual({ content: text, calls: [] });
  });
});

/** `text` in pieces of `size` characters. */
function piecesOf(text: string, size: number): string[] {
  return Array.from({ length: Math.ceil(text.length / size) }, (_, k) =>
    text.slice(k * size, (k + 1) * size),
  );
}

describe("Llama 3 JSON tool calls (vLLM's llama3_json parser)", () => {
  const call = '{"name": "get_weather", "parameters": {"city": "Oslo"}}';

  it("an answer that begins with a call object (or <|python_tag|>) is calls, anything else content", () => {
    expect(llama3Answer(call, "j1")).toEqual({
      content: null,
      calls: [
        {
          id: "call_j1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
        },
      ],
    });
    const two = llama3Answer(`<|python_tag|>${call}; {"name": "get_time", "arguments": {}}`, "j1");
    expect(two.calls.map((c) => [c.id, c.function.name, c.function.arguments])).toEqual([
      ["call_j1", "get_weather", '{"city":"Oslo"}'],
      ["call_j1_1", "get_time", "{}"],
    ]);
    // a brace or quote inside a string does not end the object
    expect(
      llama3Answer('{"name": "say", "parameters": {"text": "a } \\" {"}}', "j1").calls,
    ).toHaveLength(1);
    for (const text of ["It is sunny.", "{not json", `${call} and then text`, '{"city": "Oslo"}'])
      expect(llama3Answer(text, "j1")).toEqual({ content: text, calls: [] });
  });

  it("streamed in pieces of any size, gives what the whole answer gives; content goes out at once", () => {
    const texts = [
      call,
      ` <|python_tag|>${call};${call}`,
      "It is sunny.",
      "<|python is not the tag",
      `${call} trailing`,
    ];
    for (const text of texts)
      for (const size of [1, 2, 5, text.length]) {
        const reader = toolCallReader("llama3_json").stream("j1");
        expect(streamed(piecesOf(text, size), reader), `${text} in pieces of ${size}`).toEqual(
          llama3Answer(text, "j1"),
        );
      }
    const reader = toolCallReader("llama3_json").stream("j1");
    expect(reader.push("It ").content).toBe("It ");
    expect(reader.push("is").content).toBe("is");
    const held = toolCallReader("llama3_json").stream("j1");
    expect(held.push('{"name"').content).toBe("");
    expect(held.called).toBe(false);
    held.push(': "get_time"}');
    expect(held.end().parts).toMatchObject([{ index: 0, name: "get_time", done: true }]);
    expect(held.called).toBe(true);
  });
});
