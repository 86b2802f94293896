import type { ModelEntry, ModelRepository } from "@ferry/model-repository";
import { FerryError } from "@ferry/protocol";
import type { CompletionService } from "./completion-service.js";
import { checkPromptChars } from "./context-window.js";
import { checkTokens, entryVocab } from "./sampling-params.js";
import type { DetokenizeRequest, TokenizeRequest } from "./schemas.js";

/** Token ids one detokenize may take, in context windows. */
const MAX_TOKENS_PER_CONTEXT = 64;

/**
 * vLLM's `/tokenize` and `/detokenize`: the tokens a text model runs for a prompt or a chat,
 * from the same tokenizer and chat template the completion routes use, so that a client can
 * count and cut its prompts before it sends them (a chat's count is its `usage.prompt_tokens`).
 */
export class TokenizationService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly completions: CompletionService,
  ) {}

  async tokenize(body: TokenizeRequest) {
    const entry = this.textModel(body.model);
    const { messages } = body;
    const text =
      messages === undefined
        ? (body.prompt ?? "")
        : await this.completions.renderChat({ ...body, messages, model: entry.config.name });
    checkPromptChars(entry, text);
    const tokenizer = await this.completions.tokenizer(entry);
    // vLLM's defaults: a chat template writes the special tokens it needs itself
    const tokens = tokenizer.encode(text, body.add_special_tokens ?? messages === undefined);
    const context = entry.config.architecture?.context_length;
    return {
      count: tokens.length,
      max_model_len: typeof context === "number" ? context : null,
      tokens,
      token_strs: body.return_token_strs ? tokens.map((id) => tokenizer.piece(id)) : null,
    };
  }

  async detokenize(body: DetokenizeRequest) {
    const entry = this.textModel(body.model);
    // a bound on what one request may make the API decode, as a prompt's characters are bounded
    const context = entry.config.architecture?.context_length;
    if (typeof context === "number" && body.tokens.length > context * MAX_TOKENS_PER_CONTEXT)
      throw new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${context} tokens; ${body.tokens.length} tokens are far more than fit`,
      );
    checkTokens(entryVocab(entry), body.tokens, "Token id");
    return { prompt: (await this.completions.tokenizer(entry)).decode(body.tokens) };
  }

  /** The text model a request names, or the server's only one where it names none (vLLM's). */
  private textModel(name: string | null | undefined): ModelEntry {
    if (name != null) {
      const { entry } = this.repository.resolve(name);
      if (entry.config.kind !== "generator")
        throw new FerryError(
          "INVALID_INPUT",
          `Model '${name}' is a ${entry.config.kind}, which has no tokenizer`,
        );
      return entry;
    }
    const text = this.repository.list().filter((e) => e.config.kind === "generator");
    const [only] = text;
    if (only && text.length === 1) return only;
    throw new FerryError(
      "INVALID_INPUT",
      text.length === 0
        ? "This server has no text model to tokenize for"
        : `model is required: this server serves ${text.length} text models (${text.map((e) => e.config.name).join(", ")})`,
    );
  }
}
