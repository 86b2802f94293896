import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { HfTokenizer, type ModelEntry } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { REAL_TOKENIZERS } from "../../../../test/helpers/tokenizer-texts.js";
import { ChatTemplates } from "./chat-template.js";

const QWEN3 = REAL_TOKENIZERS["Qwen3 (byte-level BPE)"];
const LLAMA3 = REAL_TOKENIZERS["Llama 3 (byte-level BPE)"];
const GEMMA3 = REAL_TOKENIZERS["Gemma 3 (SentencePiece BPE, byte fallback)"];

/** A generator whose tokenizer files are a package's, as a user's export lays them out. */
const model = (tokenizerJson: string, config: Record<string, unknown> = {}) =>
  ({
    config: {
      name: "m",
      kind: "generator",
      tokenizer: { type: "huggingface", file: "tokenizer.json" },
      ...config,
    },
    versions: ["1"],
    defaultVersion: "1",
    dir: dirname(tokenizerJson),
  }) as unknown as ModelEntry;

/** A chat as /v1/chat/completions receives it: a system turn, a user turn, an answer, a user turn. */
const CHAT = {
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: [{ type: "text", text: "Hi" }] },
    { role: "assistant", content: "Hello! How can I help?" },
    { role: "user", content: "What is 2+2?" },
  ],
};

describe("the chat templates real models ship, rendered as /v1/chat/completions renders them", () => {
  it("Qwen3: ChatML, the generation prompt open (and closed thinking when enable_thinking is false)", async () => {
    const templates = new ChatTemplates();
    const prompt = await templates.renderRequest(model(QWEN3), CHAT);
    const chatml =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
      "<|im_start|>user\nHi<|im_end|>\n" +
      "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n" +
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n" +
      "<|im_start|>assistant\n";
    expect(prompt).toBe(chatml);
    const noThinking = await new ChatTemplates().renderRequest(model(QWEN3), {
      ...CHAT,
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(noThinking).toBe(`${chatml}<think>\n\n</think>\n\n`);
    // the worker reads it without adding special tokens: each marker is its one id
    const tok = await HfTokenizer.load(QWEN3);
    const ids = tok.encode(prompt);
    expect(ids.filter((id) => id === 151644)).toHaveLength(5); // <|im_start|>
    expect(ids.filter((id) => id === 151645)).toHaveLength(4); // <|im_end|>
    expect(tok.decode(ids)).toBe(prompt);
  });

  it("Llama 3: header blocks, <|begin_of_text|> from the config's bos_token once", async () => {
    const prompt = await new ChatTemplates().renderRequest(model(LLAMA3), CHAT);
    expect(prompt).toBe(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>" +
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>" +
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>" +
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    );
    const ids = (await HfTokenizer.load(LLAMA3)).encode(prompt);
    expect(ids[0]).toBe(128000);
    expect(ids.filter((id) => id === 128000)).toHaveLength(1);
    expect(ids.filter((id) => id === 128009)).toHaveLength(4); // <|eot_id|>
  });

  it("Gemma 3: the system turn folded into the first user turn, model turns, <bos> once", async () => {
    const prompt = await new ChatTemplates().renderRequest(model(GEMMA3), CHAT);
    expect(prompt).toBe(
      "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHi<end_of_turn>\n" +
        "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n" +
        "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n" +
        "<start_of_turn>model\n",
    );
    const ids = (await HfTokenizer.load(GEMMA3)).encode(prompt);
    expect(ids[0]).toBe(2);
    expect(ids.filter((id) => id === 2)).toHaveLength(1);
    expect(ids.filter((id) => id === 105)).toHaveLength(4); // <start_of_turn>
  });

  it("Gemma 3's raise_exception refuses roles that do not alternate, with the template's words", async () => {
    await expect(
      new ChatTemplates().renderRequest(model(GEMMA3), {
        messages: [
          { role: "user", content: "a" },
          { role: "user", content: "b" },
        ],
      }),
    ).rejects.toThrow(
      /refused these messages: Conversation roles must alternate user\/assistant\/user\/assistant/,
    );
  });
});

describe("what transformers gives a template", () => {
  it("strftime_now is Python's in the C locale (Llama 3.1's Today Date line)", async () => {
    const today = await new ChatTemplates().render(
      model(LLAMA3, {
        chat_template:
          '{%- if strftime_now is defined %}{%- set date_string = strftime_now("%d %b %Y") %}{%- endif %}Today Date: {{ date_string }}',
      }),
      [{ role: "user", content: "hi" }],
    );
    expect(today).toMatch(
      /^Today Date: \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}$/,
    );
  });

  it("every special token of the config: unk_token, pad_token and the rest", async () => {
    const out = await new ChatTemplates().render(
      model(GEMMA3, {
        chat_template: "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token }}",
      }),
      [{ role: "user", content: "hi" }],
    );
    expect(out).toBe("<bos>|<end_of_turn>|<pad>|<unk>");
  });

  it("named templates: tool_use where tools are given, default otherwise; chat_template.jinja beside the tokenizer", async () => {
    const dir = mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-tpl-"));
    writeFileSync(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({
        bos_token: { content: "<s>", special: true },
        chat_template: [
          { name: "default", template: "{{ bos_token }}plain" },
          { name: "tool_use", template: "{{ bos_token }}tools: {{ tools | length }}" },
        ],
      }),
    );
    const entry = model(join(dir, "tokenizer.json"));
    const messages = [{ role: "user", content: "hi" }];
    expect(await new ChatTemplates().render(entry, messages)).toBe("<s>plain");
    expect(await new ChatTemplates().render(entry, messages, { tools: [{}, {}] })).toBe(
      "<s>tools: 2",
    );
    const jinjaDir = mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-tpl-"));
    writeFileSync(join(jinjaDir, "chat_template.jinja"), "{{ messages[0].content }}!");
    expect(
      await new ChatTemplates().render(model(join(jinjaDir, "tokenizer.json")), messages),
    ).toBe("hi!");
  });
});
