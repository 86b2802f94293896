import {
  loadTokenizer,
  type ModelEntry,
  type Tokenizer,
  tokenizerConfigSchema,
} from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import type { ChatTemplateRequest } from "./chat-template.js";
import { checkTokens, entryVocab } from "./sampling-params.js";

/** OpenAI's and vLLM's max_tokens for a completion that leaves it out. */
export const DEFAULT_MAX_TOKENS = 16;

/**
 * Characters of prompt per token of context past which a prompt cannot fit whatever the
 * tokenizer: refused before it is tokenized, so that a huge prompt costs the API no CPU.
 */
const MAX_CHARS_PER_TOKEN = 64;

/**
 * A prompt against its model's context window: counted by the model's tokenizer (loaded once
 * per model version), refused before anything is queued when it cannot fit.
 */
export class ContextWindow {
  private readonly tokenizers = new WeakMap<ModelEntry, Promise<Tokenizer>>();

  /**
   * The completion's max_tokens: prompt plus completion must fit the context window, as vLLM
   * and OpenAI require, and none asked for is what the window leaves. A prompt of token ids
   * must name tokens the model has. `truncate`: vLLM's `truncate_prompt_tokens`, the prompt's
   * last tokens that are read (a longer prompt is then no reason to refuse).
   */
  async fit(
    entry: ModelEntry,
    prompt: string | readonly number[],
    maxTokensAsked: number | undefined,
    truncate: number | undefined,
    addSpecialTokens: boolean,
  ): Promise<{ maxTokens: number; promptTokens?: number }> {
    if (typeof prompt !== "string") checkTokens(entryVocab(entry), prompt, "Token id");
    const context = entry.config.architecture?.context_length;
    if (typeof context !== "number") return { maxTokens: maxTokensAsked ?? DEFAULT_MAX_TOKENS };
    if (truncate !== undefined && truncate > context)
      throw new FerryError(
        "INVALID_INPUT",
        `truncate_prompt_tokens value (${truncate}) is greater than max_model_len (${context}). Please, select a smaller truncation size.`,
      );
    // truncated or not, a prompt is tokenized whole, here and on the worker: the same budget
    if (typeof prompt === "string") checkPromptChars(entry, prompt);
    const whole =
      typeof prompt === "string"
        ? (await this.tokenizer(entry)).count(prompt, addSpecialTokens)
        : prompt.length;
    const promptTokens = Math.min(whole, truncate ?? whole);
    const maxTokens = maxTokensAsked ?? Math.max(1, context - promptTokens);
    if (promptTokens + maxTokens > context)
      throw new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the prompt, ${maxTokens} for the completion). Please reduce the length of the prompt or completion.`,
      );
    return { maxTokens, promptTokens };
  }

  /** The model's tokenizer, loaded once. */
  tokenizer(entry: ModelEntry): Promise<Tokenizer> {
    let tokenizer = this.tokenizers.get(entry);
    if (!tokenizer) {
      const config = tokenizerConfigSchema.parse(entry.config.tokenizer ?? { type: "byte" });
      tokenizer = loadTokenizer(entry.dir, config);
      this.tokenizers.set(entry, tokenizer);
    }
    return tokenizer;
  }
}

/**
 * Refuses a text that cannot fit the model's context whatever its tokenizer, before it is
 * tokenized: a huge prompt costs the API no CPU.
 */
export function checkPromptChars(entry: ModelEntry, text: string): void {
  const context = entry.config.architecture?.context_length;
  if (typeof context === "number" && text.length > context * MAX_CHARS_PER_TOKEN)
    throw new FerryError(
      "INVALID_INPUT",
      `This model's maximum context length is ${context} tokens; the prompt has ${text.length} characters, far more than fit`,
    );
}

/**
 * Refuses more messages than the model's context has tokens, before any template renders
 * them: a template writes each message's role and separators however empty its text (2,048
 * empty messages, 64 KB, rendered 8,194 tokens for a 256-token window, ~4 ms of the API's
 * loop each and under the byte rate's floor: four connections of them took another key's
 * predict p50 from 1 to 31 ms).
 */
export function checkMessageCount(entry: ModelEntry, count: number): void {
  const context = entry.config.architecture?.context_length;
  if (typeof context === "number" && count > context)
    throw new FerryError(
      "INVALID_INPUT",
      `This model's maximum context length is ${context} tokens; the chat has ${count} messages, each at least a token once its template writes it`,
    );
}

/**
 * Every character a chat's messages send (their text, their calls as JSON, the ids and names
 * a template may write): what a stored conversation keeps, so each counts against the window.
 */
export function messageText(messages: ChatTemplateRequest["messages"]): string {
  let text = "";
  for (const m of messages) {
    const content = m.content;
    if (typeof content === "string") text += content;
    else if (content) for (const part of content) text += part.text;
    if (m.tool_calls) text += JSON.stringify(m.tool_calls);
    if (m.tool_call_id) text += m.tool_call_id;
    if (m.name) text += m.name;
  }
  return text;
}
