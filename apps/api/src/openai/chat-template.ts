import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  type ModelEntry,
  readTokenizerConfig,
  SPECIAL_TOKEN_KEYS,
  tokenizerConfigSchema,
} from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import { Template } from "@huggingface/jinja";
import { wrongKind } from "../http/kind-routes.js";
import { renderTemplate } from "./jinja-render.js";

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
    name?: string | undefined;
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
  /** The template, or by name where the config has several (`default`, `tool_use`). */
  templates: Map<string, Template>;
  /** Hugging Face's `special_tokens_map`: `bos_token`, `eos_token`, ... as the template reads them. */
  specialTokens: Record<string, string | string[]>;
}

/**
 * Chat templates, Hugging Face's convention: a Jinja string in model.json's `chat_template`,
 * else what `save_pretrained` wrote beside the model's tokenizer.json: `chat_template` in its
 * `tokenizer_config.json` (one, or several by name), else a `chat_template.jinja`. Rendered with
 * a real Jinja implementation and the variables transformers gives a template: the config's
 * special tokens, `raise_exception`, `strftime_now`. A model with no template refuses chat
 * (vLLM's behaviour): a guessed format would make answers that look right and are not.
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
        entry.config.kind === "classifier" || entry.config.kind === "embedder"
          ? wrongKind(entry.config.name, entry.config.kind)
          : `Model '${entry.config.name}' has no chat template (chat_template in model.json or in tokenizer_config.json beside it); use /v1/completions`,
      );
    const { tools, addGenerationPrompt = true, continueFinalMessage = false } = options;
    if (addGenerationPrompt && continueFinalMessage)
      throw new FerryError(
        "INVALID_INPUT",
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
      );
    // transformers' choice among named templates: tool_use where tools are given and it exists
    const template =
      (tools ? loaded.templates.get("tool_use") : undefined) ?? loaded.templates.get("default");
    if (!template)
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${entry.config.name}' has no default chat template among ${[...loaded.templates.keys()].join(", ")}`,
      );
    let rendered: string;
    try {
      // the request's own tools or none: kwargs cannot slip tools past their budgets
      const { tools: _kwargsTools, ...kwargs } = options.templateKwargs ?? {};
      rendered = renderTemplate(template, {
        ...kwargs,
        messages,
        // Hugging Face's: a template that knows tools writes them into the prompt
        ...(tools ? { tools } : {}),
        add_generation_prompt: addGenerationPrompt,
        ...loaded.specialTokens,
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
  const dir = tokenizerDir(entry);
  const config = (await readTokenizerConfig(join(dir, "tokenizer_config.json"))) ?? {};
  const source =
    entry.config.chat_template ??
    (config.chat_template as unknown) ??
    (await readFile(join(dir, "chat_template.jinja"), "utf8").catch(() => undefined));
  const templates = new Map<string, Template>();
  if (typeof source === "string") templates.set("default", new Template(source));
  else if (Array.isArray(source))
    for (const named of source as Array<{ name?: unknown; template?: unknown }>)
      if (typeof named.name === "string" && typeof named.template === "string")
        templates.set(named.name, new Template(named.template));
  if (templates.size === 0) return undefined;
  // a template may write bos_token or eos_token without asking whether the model has one
  const specialTokens: Record<string, string | string[]> = { bos_token: "", eos_token: "" };
  for (const key of SPECIAL_TOKEN_KEYS)
    if (typeof config[key] === "string") specialTokens[key] = config[key];
  if (Array.isArray(config.additional_special_tokens))
    specialTokens.additional_special_tokens = config.additional_special_tokens as string[];
  return { templates, specialTokens };
}

/** Where `save_pretrained` put the model's tokenizer files: beside its tokenizer.json. */
function tokenizerDir(entry: ModelEntry): string {
  const tokenizer = tokenizerConfigSchema.safeParse(entry.config.tokenizer ?? { type: "byte" });
  return tokenizer.success && tokenizer.data.type === "huggingface"
    ? dirname(join(entry.dir, tokenizer.data.file))
    : entry.dir;
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
