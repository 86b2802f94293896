import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { ModelEntry } from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import { Template } from "@huggingface/jinja";

/** One chat message as the template sees it: a role and its text (and calls, Hugging Face's names). */
export interface TemplateMessage {
  role: string;
  content: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** A chat request as far as its template reads it (`/v1/chat/completions`, `/tokenize`). */
export interface ChatTemplateRequest {
  messages: ReadonlyArray<{
    role: string;
    content?: string | ReadonlyArray<{ text: string }> | null | undefined;
    tool_calls?: unknown[] | undefined;
    tool_call_id?: string | undefined;
  }>;
  tools?: unknown[] | null | undefined;
  add_generation_prompt?: boolean | null | undefined;
  continue_final_message?: boolean | null | undefined;
  chat_template_kwargs?: Record<string, unknown> | null | undefined;
}

/** How a chat is rendered, past its messages: vLLM's chat-template fields. */
export interface RenderOptions {
  tools?: unknown[] | undefined;
  addGenerationPrompt?: boolean | undefined;
  continueFinalMessage?: boolean | undefined;
  templateKwargs?: Record<string, unknown> | undefined;
}

interface LoadedTemplate {
  template: Template;
  bosToken: string;
  eosToken: string;
}

/**
 * Chat templates, Hugging Face's convention: a Jinja string in model.json's `chat_template`,
 * else in a `tokenizer_config.json` beside the model (with its `bos_token` / `eos_token`),
 * rendered with a real Jinja implementation. A model with neither refuses chat (vLLM's
 * behaviour): a guessed format would make answers that look right and are not.
 */
export class ChatTemplates {
  private readonly loaded = new WeakMap<ModelEntry, Promise<LoadedTemplate | undefined>>();

  /**
   * The prompt the model is given for `messages`: by default ending where the assistant's turn
   * begins. `addGenerationPrompt: false` ends it after the last message (vLLM's
   * `add_generation_prompt`), and `continueFinalMessage` leaves that message open so that the
   * model continues it (vLLM's `continue_final_message`, Hugging Face's rule: the text is cut
   * right after the message's content, whatever the template writes after it).
   * `templateKwargs` are more variables for the template (vLLM's `chat_template_kwargs`, e.g.
   * Qwen 3's `enable_thinking`); they cannot replace the messages, tools or special tokens.
   */
  async render(
    entry: ModelEntry,
    messages: TemplateMessage[],
    options: RenderOptions = {},
  ): Promise<string> {
    const loaded = await this.load(entry);
    if (!loaded)
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${entry.config.name}' has no chat template (chat_template in model.json or in tokenizer_config.json beside it); use /v1/completions`,
      );
    const { tools, addGenerationPrompt = true, continueFinalMessage = false } = options;
    if (addGenerationPrompt && continueFinalMessage)
      throw new FerryError(
        "INVALID_INPUT",
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
      );
    let rendered: string;
    try {
      rendered = loaded.template.render({
        ...options.templateKwargs,
        messages,
        // Hugging Face's: a template that knows tools writes them into the prompt
        ...(tools ? { tools } : {}),
        add_generation_prompt: addGenerationPrompt,
        bos_token: loaded.bosToken,
        eos_token: loaded.eosToken,
      });
    } catch (err) {
      throw new FerryError(
        "INVALID_INPUT",
        `The chat template of '${entry.config.name}' refused these messages: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return continueFinalMessage ? openFinalMessage(rendered, messages) : rendered;
  }

  /** A chat request's prompt: its messages' text parts joined, its chat-template fields applied. */
  renderRequest(entry: ModelEntry, chat: ChatTemplateRequest): Promise<string> {
    const messages = chat.messages.map((m) => ({
      role: m.role,
      content:
        typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text).join(""),
      ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}),
      ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
    }));
    return this.render(entry, messages, {
      tools: chat.tools ?? undefined,
      addGenerationPrompt: chat.add_generation_prompt ?? true,
      continueFinalMessage: chat.continue_final_message ?? false,
      templateKwargs: chat.chat_template_kwargs ?? undefined,
    });
  }

  private load(entry: ModelEntry): Promise<LoadedTemplate | undefined> {
    let loaded = this.loaded.get(entry);
    if (!loaded) {
      loaded = readTemplate(entry);
      this.loaded.set(entry, loaded);
    }
    return loaded;
  }
}

async function readTemplate(entry: ModelEntry): Promise<LoadedTemplate | undefined> {
  let source = entry.config.chat_template;
  let bosToken = "";
  let eosToken = "";
  const tokenizerConfig = await readFile(join(entry.dir, "tokenizer_config.json"), "utf8").then(
    (text) => JSON.parse(text) as Record<string, unknown>,
    () => undefined,
  );
  if (tokenizerConfig) {
    if (source === undefined && typeof tokenizerConfig.chat_template === "string")
      source = tokenizerConfig.chat_template;
    bosToken = tokenText(tokenizerConfig.bos_token);
    eosToken = tokenText(tokenizerConfig.eos_token);
  }
  return source === undefined ? undefined : { template: new Template(source), bosToken, eosToken };
}

/**
 * The rendered chat cut right after the final message's content, as Hugging Face's
 * `continue_final_message` cuts it: at its last appearance, keeping its leading and trailing
 * blanks where the template kept them, else the text without them (a template that trims).
 */
function openFinalMessage(rendered: string, messages: readonly TemplateMessage[]): string {
  const content = messages.at(-1)?.content ?? "";
  if (content.trim() === "")
    throw new FerryError("INVALID_INPUT", "continue_final_message needs a final message with text");
  const at = rendered.lastIndexOf(content.trim());
  if (at < 0)
    throw new FerryError(
      "INVALID_INPUT",
      "continue_final_message is set but the final message does not appear in the chat after applying the chat template",
    );
  const whole = content.trimStart();
  return rendered.startsWith(whole, at)
    ? rendered.slice(0, at + whole.length)
    : rendered.slice(0, at + content.trim().length);
}

/** A special token as tokenizer_config.json writes it: a string, or {content: string}. */
function tokenText(token: unknown): string {
  if (typeof token === "string") return token;
  if (token && typeof token === "object" && "content" in token)
    return String((token as { content: unknown }).content);
  return "";
}
