import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ModelEntry } from "@ferry/model-repository";
import type { ModelConfig } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { ChatTemplates } from "./chat-template.js";

// ChatML as Hugging Face's chat templating guide documents it, with its documented output.
const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const entry = (config: Partial<ModelConfig> & Record<string, unknown>, dir = "/nonexistent") =>
  ({
    config: { name: "m", ...config },
    versions: ["1"],
    defaultVersion: "1",
    dir,
  }) as unknown as ModelEntry;

describe("ChatTemplates", () => {
  it("renders ChatML exactly as Hugging Face documents it", async () => {
    const prompt = await new ChatTemplates().render(entry({ chat_template: CHATML }), [
      { role: "user", content: "Hi there!" },
      { role: "assistant", content: "Nice to meet you!" },
      { role: "user", content: "Can I ask a question?" },
    ]);
    expect(prompt).toBe(
      "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\nNice to meet you!<|im_end|>\n<|im_start|>user\nCan I ask a question?<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("reads tokenizer_config.json beside the model, with its bos and eos tokens", async () => {
    const dir = mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-tpl-"));
    writeFileSync(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({
        chat_template:
          "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}",
        bos_token: "<s>",
        eos_token: { content: "</s>" },
      }),
    );
    const prompt = await new ChatTemplates().render(entry({}, dir), [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]);
    expect(prompt).toBe("<s>a</s>b</s>");
  });

  it("leaves the final message open (continue_final_message) as Hugging Face cuts it", async () => {
    const chatml = entry({ chat_template: CHATML });
    const open = { addGenerationPrompt: false, continueFinalMessage: true };
    const messages = [
      { role: "user", content: "Name a colour." },
      { role: "assistant", content: "The colour is " },
    ];
    // the template keeps the message's trailing blank: so does the cut
    expect(await new ChatTemplates().render(chatml, messages, open)).toBe(
      "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\nThe colour is ",
    );
    // tiny-lm's trims an answer: the cut follows the text the template wrote
    const tiny = entry(JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")));
    expect(await new ChatTemplates().render(tiny, messages, open)).toBe(
      "Q: Name a colour.\nA: The colour is",
    );
    // with the generation prompt too, or with nothing to continue: refused, not guessed
    await expect(
      new ChatTemplates().render(chatml, messages, { continueFinalMessage: true }),
    ).rejects.toThrow("Cannot set both `continue_final_message` and `add_generation_prompt`");
    await expect(
      new ChatTemplates().render(chatml, [{ role: "user", content: " " }], open),
    ).rejects.toThrow(/needs a final message with text/);
  });

  it("ends after the last message without the generation prompt, and hands chat_template_kwargs to the template", async () => {
    const thinking = entry({
      chat_template: `${CHATML}{% if add_generation_prompt and not enable_thinking %}<think></think>{% endif %}`,
    });
    const messages = [{ role: "user", content: "Hi" }];
    const templates = new ChatTemplates();
    expect(await templates.render(thinking, messages, { addGenerationPrompt: false })).toBe(
      "<|im_start|>user\nHi<|im_end|>\n",
    );
    expect(
      await templates.render(thinking, messages, { templateKwargs: { enable_thinking: true } }),
    ).toBe("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect(
      await templates.render(thinking, messages, { templateKwargs: { enable_thinking: false } }),
    ).toBe("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></think>");
    // a variable of its own cannot replace the messages
    expect(
      await templates.render(thinking, messages, {
        templateKwargs: { enable_thinking: true, messages: [{ role: "user", content: "other" }] },
      }),
    ).toContain("Hi");
    // nor give tools where the request gives none: they would pass no tools' budget
    const withTools = entry({
      chat_template: `{% if tools %}TOOLS {{ tools | length }}{% endif %}${CHATML}`,
    });
    const kwargsTools = { tools: [{ type: "function", function: { name: "f" } }] };
    expect(
      await templates.render(withTools, messages, { templateKwargs: kwargsTools }),
    ).not.toContain("TOOLS");
  });

  it("a model without a template refuses chat, naming what is missing", async () => {
    await expect(
      new ChatTemplates().render(entry({}), [{ role: "user", content: "hi" }]),
    ).rejects.toThrow(/has no chat template/);
  });
});

describe("tiny-lm's template", () => {
  it("renders turns exactly as the chat fine-tune (models/build/build_tiny_lm_chat.py) wrote them", async () => {
    const config = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as Record<
      string,
      unknown
    >;
    const templates = new ChatTemplates();
    const tiny = entry(config);
    expect(
      await templates.render(tiny, [
        { role: "system", content: "Answer briefly." },
        { role: "user", content: "Why?" },
      ]),
    ).toBe("System: Answer briefly.\nQ: Why?\nA:");
    // an answer as given, or as the model wrote it after "A:" (a space first): as it was written
    for (const answer of ["Hello.", " Hello."])
      expect(
        await templates.render(tiny, [
          { role: "user", content: "Hi" },
          { role: "assistant", content: answer },
          { role: "user", content: "And?" },
        ]),
      ).toBe("Q: Hi\nA: Hello.\nQ: And?\nA:");
  });
});
