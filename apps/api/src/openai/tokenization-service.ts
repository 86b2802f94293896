import type { ModelEntry, ModelRepository, Tokenizer } from "@ferry/model-repository";
import { EMBED_MAX_CHARS_PER_TOKEN, type EmbeddingConfig, FerryError } from "@ferry/protocol";
import type { CompletionService } from "./completion-service.js";
import { checkPromptChars } from "./context-window.js";
import type { EmbeddingsService } from "./embeddings-service.js";
import { checkTokens, entryVocab } from "./sampling-params.js";
import type { DetokenizeRequest, TokenizeRequest } from "./tokenize-schemas.js";

/** Token ids one detokenize may take, in context windows. */
const MAX_TOKENS_PER_CONTEXT = 64;

/**
 * vLLM's `/tokenize` and `/detokenize`: the tokens a text model runs for a prompt or a chat,
 * from the same tokenizer and chat template the completion routes use, so that a client can
 * count and cut its prompts before it sends them (a chat's count is its `usage.prompt_tokens`);
 * for an embedder (as vLLM's pooling models), a text's tokens as `/v1/embeddings` counts them.
 */
export class TokenizationService {
  constructor(
    private readonly repository: ModelRepository,
    private readonly completions: CompletionService,
    private readonly embeddings: Pick<EmbeddingsService, "tokenizer">,
  ) {}

  async tokenize(body: TokenizeRequest) {
    const entry = this.textModel(body.model);
    const { messages } = body;
    const embedding = entry.config.embedding as EmbeddingConfig | undefined;
    if (embedding && messages !== undefined)
      throw new FerryError(
        "INVALID_INPUT",
        `Model '${entry.config.name}' is an embedder, which has no chat template: send a prompt`,
      );
    const text =
      messages === undefined
        ? (body.prompt ?? "")
        : await this.completions.renderChat({ ...body, messages, model: entry.config.name });
    const window = windowOf(entry);
    if (embedding && text.length > embedding.max_tokens * EMBED_MAX_CHARS_PER_TOKEN)
      throw new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${embedding.max_tokens} tokens; the prompt has ${text.length} characters, far more than fit`,
      );
    if (!embedding) checkPromptChars(entry, text);
    const tokenizer = await this.tokenizerOf(entry);
    // vLLM's defaults: a chat template writes the special tokens it needs itself
    const tokens = tokenizer.encode(text, body.add_special_tokens ?? messages === undefined);
    return {
      count: tokens.length,
      max_model_len: window ?? null,
      tokens,
      token_strs: body.return_token_strs ? tokens.map((id) => tokenizer.piece(id)) : null,
    };
  }

  async detokenize(body: DetokenizeRequest) {
    const entry = this.textModel(body.model);
    // a bound on what one request may make the API decode, as a prompt's characters are bounded
    const window = windowOf(entry);
    if (window !== undefined && body.tokens.length > window * MAX_TOKENS_PER_CONTEXT)
      throw new FerryError(
        "INVALID_INPUT",
        `This model's maximum context length is ${window} tokens; ${body.tokens.length} tokens are far more than fit`,
      );
    checkTokens(entryVocab(entry), body.tokens, "Token id");
    return { prompt: (await this.tokenizerOf(entry)).decode(body.tokens) };
  }

  private tokenizerOf(entry: ModelEntry): Promise<Tokenizer> {
    return entry.config.kind === "embedder"
      ? this.embeddings.tokenizer(entry)
      : this.completions.tokenizer(entry);
  }

  /**
   * The model a request names, if it has a tokenizer (a text model or an embedder), or the
   * server's only text model where it names none (vLLM's).
   */
  private textModel(name: string | null | undefined): ModelEntry {
    if (name != null) {
      const { entry } = this.repository.resolve(name);
      if (entry.config.kind === "classifier")
        throw new FerryError(
          "INVALID_INPUT",
          `Model '${name}' is a classifier, which has no tokenizer`,
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

/** The tokens a model reads at once: a text model's context, an embedder's input. */
function windowOf(entry: ModelEntry): number | undefined {
  const embedding = entry.config.embedding as EmbeddingConfig | undefined;
  if (embedding) return embedding.max_tokens;
  const context = entry.config.architecture?.context_length;
  return typeof context === "number" ? context : undefined;
}
