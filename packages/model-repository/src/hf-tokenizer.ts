import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Tokenizer as HfTokenizerImpl } from "@huggingface/tokenizers";
import { boundWordPiece, isWordPiece } from "./bounded-wordpiece.js";
import { DecodeStream } from "./decode-stream.js";
import { TokenSpelling } from "./token-spelling.js";
import { type Tokenizer, tokenFromBytes } from "./tokenizer.js";
import { readTokenizerConfig } from "./tokenizer-config.js";

/** Hugging Face's `decode` options Ferry reads text with. */
const TEXT = { skip_special_tokens: true, clean_up_tokenization_spaces: false };
const ALL = { skip_special_tokens: false, clean_up_tokenization_spaces: false };

/**
 * A Hugging Face `tokenizer.json`, whatever its model (BPE byte-level or SentencePiece-style,
 * WordPiece, Unigram), normalizers, pre-tokenizers, post-processor and added tokens, run by
 * @huggingface/tokenizers (transformers.js's), with the `tokenizer_config.json` beside it when
 * there is one (its special tokens and end of text). So a user's own export drops into models/
 * with only a model.json.
 *
 * Text never gets transformers' `clean_up_tokenization_spaces` (" ," to ","), whatever the
 * config says: vLLM and TGI leave it out of generated text too, and it would change code and
 * quoted text the model wrote ("a ? b : c").
 */
export class HfTokenizer implements Tokenizer {
  private readonly spelling: TokenSpelling;
  private readonly special: ReadonlySet<number>;
  /** Tokens as logprobs read them, kept: several are asked for per token generated. */
  private readonly texts = new Map<number, { token: string; bytes: number[] }>();
  private adds: boolean | undefined;

  private constructor(
    private readonly impl: HfTokenizerImpl,
    readonly eosTokenId: number | undefined,
    decoder: unknown,
    additionalSpecial: readonly string[],
  ) {
    const added = impl.get_added_tokens_decoder();
    const special = new Set([...added.values()].filter((t) => t.special).map((t) => t.id));
    for (const content of additionalSpecial) {
      const id = impl.token_to_id(content);
      if (id !== undefined) special.add(id);
    }
    this.special = special;
    this.spelling = new TokenSpelling(
      {
        piece: (id) => impl.id_to_token(id),
        text: (ids) => this.text(ids),
        encode: (text) => this.encode(text),
      },
      decoder,
      special,
      new Set(added.keys()),
    );
  }

  /**
   * `eosTokenId`: model.json's, else the config's `eos_token`, so that a model whose
   * model.json leaves it out still stops where its tokenizer says text ends.
   */
  static async load(tokenizerJson: string, eosTokenId?: number): Promise<HfTokenizer> {
    const json = JSON.parse(await readFile(tokenizerJson, "utf8")) as Record<string, unknown>;
    const config =
      (await readTokenizerConfig(join(dirname(tokenizerJson), "tokenizer_config.json"))) ?? {};
    const impl = new HfTokenizerImpl(json, config);
    const model = (impl as unknown as { model?: unknown }).model;
    if (isWordPiece(model)) boundWordPiece(model);
    const eos =
      typeof config.eos_token === "string" ? impl.token_to_id(config.eos_token) : undefined;
    const additional = Array.isArray(config.additional_special_tokens)
      ? (config.additional_special_tokens as string[])
      : [];
    return new HfTokenizer(impl, eosTokenId ?? eos, json.decoder, additional);
  }

  get exactTokenBytes(): boolean {
    return this.spelling.exact;
  }

  encode(text: string, addSpecialTokens = false): number[] {
    return this.impl.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  count(text: string, addSpecialTokens = false): number {
    return this.encode(text, addSpecialTokens).length;
  }

  get addsSpecialTokens(): boolean {
    this.adds ??= this.encode("a", true).length > this.encode("a").length;
    return this.adds;
  }

  decode(ids: readonly number[]): string {
    const known = this.known(ids);
    return known.length === 0 ? "" : this.impl.decode(known, ALL);
  }

  piece(id: number): string {
    return this.impl.id_to_token(id) ?? "";
  }

  tokenText(id: number): { token: string; bytes: number[] } {
    let text = this.texts.get(id);
    if (!text) {
      text = this.readTokenText(id);
      this.texts.set(id, text);
    }
    return text;
  }

  private readTokenText(id: number): { token: string; bytes: number[] } {
    // a special token as it is written: generated text leaves it out, but a client reading
    // logprobs sees which one it was
    if (this.special.has(id)) {
      const token = this.piece(id);
      return { token, bytes: [...Buffer.from(token, "utf8")] };
    }
    return tokenFromBytes(this.spelling.bytes(id));
  }

  tokenBytes(id: number): readonly number[] {
    return this.spelling.bytes(id);
  }

  decoder(context: readonly number[] = []) {
    return new DecodeStream((ids) => this.text(ids), context);
  }

  /** Ids' text as generated text has it: special tokens left out. */
  private text(ids: readonly number[]): string {
    const known = this.known(ids);
    return known.length === 0 ? "" : this.impl.decode(known, TEXT);
  }

  /** Ids the vocabulary has: a model's logits may be padded past it. */
  private known(ids: readonly number[]): number[] {
    return ids.filter((id) => this.impl.id_to_token(id) !== undefined);
  }
}
