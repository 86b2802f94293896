import type { CompletionResult } from "@ferry/protocol";
import type { JobRecord } from "@ferry/transport";
import { describe, expect, it } from "vitest";
import { type ResponseEvent, ResponseEvents } from "./responses-events.js";
import { outputItems, type ResponsesMeta } from "./responses-render.js";

const meta: ResponsesMeta = {
  conversation: [{ role: "user", content: "Weather in Oslo?" }],
  echo: {
    instructions: null,
    max_output_tokens: null,
    previous_response_id: null,
    temperature: 1,
    top_p: 1,
    text: { format: { type: "text" } },
    metadata: {},
    user: null,
    store: true,
    background: false,
    parallel_tool_calls: true,
    top_logprobs: 0,
    tools: [],
    tool_choice: "auto",
  },
};

const job = (ask: Record<string, unknown>): JobRecord => ({
  id: "j1",
  model: "m",
  version: "1",
  status: "running",
  created_at: 1_700_000_000_000,
  started_at: null,
  finished_at: null,
  result: null,
  error: null,
  meta: { responses: meta, format: "chat", ...ask },
  owner: "",
  deadline: undefined,
});

const result = (text: string): CompletionResult => ({
  text,
  finish_reason: "stop",
  usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 },
  ttft_ms: 1,
});

/** The events of an answer streamed in pieces of `size` characters. */
function events(record: JobRecord, text: string, size: number): ResponseEvent[] {
  const shaped = new ResponseEvents(record, meta);
  const out = shaped.start();
  for (let at = 0; at < text.length; at += size)
    out.push(...shaped.token({ type: "token", index: at, text: text.slice(at, at + size) }));
  out.push(...shaped.result(result(text)));
  return out;
}

/**
 * The output a client builds from the events, as openai's ResponseStream builds it: items
 * pushed when added, text parts pushed when added, deltas appended; each item then replaced by
 * its `output_item.done`. Fails on an event for an index never added, or added twice.
 */
function accumulated(list: ResponseEvent[]) {
  const output: Array<Record<string, unknown> & { content?: Array<{ text: string }> }> = [];
  const done = new Map<number, unknown>();
  for (const e of list) {
    const index = e.output_index as number;
    if (e.type === "response.output_item.added") {
      expect(index).toBe(output.length);
      output.push(structuredClone(e.item) as (typeof output)[number]);
    } else if (e.type === "response.content_part.added") {
      output[index]?.content?.push(structuredClone(e.part) as { text: string });
    } else if (e.type === "response.output_text.delta") {
      const part = output[index]?.content?.[e.content_index as number];
      if (!part) throw new Error(`a delta for a part never added (item ${index})`);
      part.text += e.delta as string;
    } else if (e.type === "response.function_call_arguments.delta") {
      const item = output[index];
      if (!item) throw new Error(`arguments for an item never added (${index})`);
      item.arguments = `${item.arguments as string}${e.delta as string}`;
    } else if (e.type === "response.output_item.done") {
      expect(done.has(index)).toBe(false);
      done.set(index, e.item);
      expect(output[index]?.type).toBe((e.item as { type: string }).type);
    }
  }
  return { output, done: [...done.entries()].sort(([a], [b]) => a - b).map(([, item]) => item) };
}

const call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';

describe("a Responses stream's events", () => {
  it('tool_choice "auto" (Hermes): text and calls as they are read, in pieces of every size, the same output as the answer whole', () => {
    const record = job({ tool_call: "auto", parser: "hermes" });
    for (const text of [`Let me look. ${call}`, call, `${call}\n${call}`, "Just text, no call."]) {
      const whole = outputItems(record, result(text));
      for (let size = 1; size <= text.length; size++) {
        const list = events(record, text, size);
        const { output, done } = accumulated(list);
        expect(done, `${JSON.stringify(text)} in pieces of ${size}`).toEqual(whole);
        // what the deltas built is what each item ends as
        for (const [k, item] of whole.entries()) {
          const built = output[k];
          if (item.type === "message")
            expect(built?.content?.[0]?.text).toBe(item.content[0]?.text);
          else expect(built?.arguments).toBe(item.arguments);
        }
        expect(list.at(-1)?.type).toBe("response.completed");
      }
      // live: every call whose closing tag has come is out before the result
      const shaped = new ResponseEvents(record, meta);
      const before = [shaped.start(), shaped.token({ type: "token", index: 0, text })].flat();
      const closed = text.split("</tool_call>").length - 1;
      expect(before.filter((e) => e.type === "response.function_call_arguments.done")).toHaveLength(
        closed,
      );
    }
  });

  it("parallel_tool_calls: false streams the first call alone, as the answer whole has it", () => {
    const record = job({ tool_call: "auto", parser: "hermes", single: true });
    const text = `${call}\n${call}`;
    const whole = outputItems(record, result(text));
    expect(whole).toHaveLength(1);
    for (const size of [1, 7, text.length])
      expect(accumulated(events(record, text, size)).done).toEqual(whole);
  });

  it("text, and a forced call, stream live from the first event", () => {
    const plain = events(job({}), "Hello there.", 3);
    expect(plain.slice(0, 4).map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(accumulated(plain).done).toEqual(outputItems(job({}), result("Hello there.")));
    const forced = job({ tool_call: "named", name: "get_weather" });
    const args = '{"city": "Oslo"}';
    const list = events(forced, args, 4);
    expect(list.filter((e) => e.type === "response.function_call_arguments.delta")).toHaveLength(4);
    const { output, done } = accumulated(list);
    expect(done).toEqual(outputItems(forced, result(args)));
    expect(output[0]?.arguments).toBe(args);
  });
});
