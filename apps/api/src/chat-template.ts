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

  /** The prompt the model is given for `messages`, ending where the assistant's turn begins. */
  async render(entry: ModelEntry, messages: TemplateMessage[], tools?: unknown[]): Promise<string> {
    const loaded = await this.load(entry);
    if (!loaded)
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${entry.config.name}' has no chat template (chat_template in model.json or in tokenizer_config.json beside it); use /v1/completions`,
      );
    try {
      return loaded.template.render({
        messages,
        // Hugging Face's: a template that knows tools writes them into the prompt
        ...(tools ? { tools } : {}),
        add_generation_prompt: true,
        bos_token: loaded.bosToken,
        eos_token: loaded.eosToken,
      });
    } catch (err) {
      throw new FerryError(
        "INVALID_INPUT",
        `The chat template of '${entry.config.name}' refused these messages: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
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

/** A special token as tokenizer_config.json writes it: a string, or {content: string}. */
function tokenText(token: unknown): string {
  if (typeof token === "string") return token;
  if (token && typeof token === "object" && "content" in token)
    return String((token as { content: unknown }).content);
  return "";
}
