import type { ModelRepository } from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import { type ChatTemplateRequest, ChatTemplates } from "./chat-template.js";
import { checkMessageCount, checkPromptChars, messageText } from "./context-window.js";
import type { AsCompletion } from "./sampling-params.js";
import type { ChatCompletionRequest as ChatRequest, CompletionRequest } from "./schemas.js";
import { toolChoice } from "./tool-calls.js";

/**
 * Chat requests as the completions they are: messages rendered by the model's chat template,
 * once per request, and the chat's own fields turned into a completion's.
 */
export class ChatPrompts {
  private readonly templates = new ChatTemplates();
  /** Rendered chats by their messages (weakly: gone with the request). */
  private readonly renders = new WeakMap<ChatTemplateRequest["messages"], Promise<string>>();

  constructor(private readonly repository: ModelRepository) {}

  /**
   * A chat request as the completion it is: its messages rendered by the model's chat template
   * into one prompt that ends where the assistant's turn begins. The job remembers it was a
   * chat, so that its result is rendered as one.
   */
  async asCompletion(body: CompletionRequest | ChatRequest): Promise<AsCompletion> {
    if (!("messages" in body)) return { ...body, format: "completion" };
    const {
      messages: _m,
      max_completion_tokens,
      user: _u,
      logprobs,
      top_logprobs,
      tools: _t,
      tool_choice: _c,
      parallel_tool_calls: _p,
      add_generation_prompt: _g,
      continue_final_message: _f,
      chat_template_kwargs: _k,
      add_special_tokens,
      // refused unless false (vLLM's, which Ferry's chat lacks)
      echo: _e,
      chat_template: _ct,
      documents: _d,
      ...rest
    } = body;
    // OpenAI's rule: alternatives are asked for with the log probabilities, not alone
    if (!logprobs && (top_logprobs ?? 0) > 0)
      throw new FerryError("INVALID_INPUT", "top_logprobs needs logprobs: true");
    // a forced call is guided decoding by its parameters' schema
    const call = toolChoice(
      body,
      this.repository.resolve(body.model).entry.config.tool_call_parser,
    );
    return {
      ...rest,
      prompt: await this.render(body),
      max_tokens: max_completion_tokens ?? body.max_tokens,
      logprobs: logprobs ? (top_logprobs ?? 0) : null,
      format: "chat",
      // vLLM's default for a chat: its template writes the special tokens it needs
      add_special_tokens: add_special_tokens ?? false,
      ...(call ? { toolCall: call } : {}),
    };
  }

  /**
   * A chat's messages rendered by its model's template, once per request: the `n` choices of
   * one request share its messages (`severalChoices` copies the reference).
   */
  render(body: ChatTemplateRequest & { model: string }): Promise<string> {
    let prompt = this.renders.get(body.messages);
    if (!prompt) {
      const { entry } = this.repository.resolve(body.model);
      // measured before any template runs: text that cannot fit costs no rendering
      checkMessageCount(entry, body.messages.length);
      checkPromptChars(entry, messageText(body.messages));
      prompt = this.templates.renderRequest(entry, body);
      this.renders.set(body.messages, prompt);
    }
    return prompt;
  }
}
