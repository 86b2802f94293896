/** Turns text into token ids and ids back into text, one token at a time. */
export interface Tokenizer {
  /**
   * The ids of `text`, as every route runs a prompt: without the special tokens a
   * tokenizer's post-processor would add (a chat template writes those it needs), unless
   * `addSpecialTokens` (vLLM's `/tokenize` field) asks for them.
   */
  encode(text: string, addSpecialTokens?: boolean): number[];
  /** How many tokens `text` encodes to (cheaper than encoding where the tokenizer allows). */
  count(text: string, addSpecialTokens?: boolean): number;
  /** Whether `addSpecialTokens` adds any: the tokenizer has a post-processor that does. */
  readonly addsSpecialTokens: boolean;
  /**
   * A fresh decoder for one sequence: `push` returns the text a token completes (maybe "").
   * `context`: the ids before the first one pushed (the prompt), so that the first token reads
   * as it does mid-text (a SentencePiece word's leading space) rather than as a text's start.
   */
  decoder(context?: readonly number[]): { push(id: number): string; flush(): string };
  /** Ids back into text, special tokens included (vLLM's `/detokenize`). */
  decode(ids: readonly number[]): string;
  /** A token as its vocabulary writes it (Hugging Face's `convert_ids_to_tokens`). */
  piece(id: number): string;
  /** One token as a client reads it (logprobs): its text alone, and its UTF-8 bytes. */
  tokenText(id: number): { token: string; bytes: number[] };
  /**
   * The bytes a token adds to generated text past its first token (what `decoder` streams):
   * none for one that text leaves out (a special token, an id past the vocabulary).
   */
  tokenBytes(id: number): readonly number[];
  readonly eosTokenId: number | undefined;
  /**
   * Whether `tokenBytes` are exact, the text of any tokens their bytes joined (byte-level BPE,
   * SentencePiece with byte fallback, WordPiece), so that text can be spelled token by token
   * (guided decoding).
   */
  readonly exactTokenBytes: boolean;
}

/**
 * A token's bytes as text, or OpenAI's `bytes:\xNN...` form where they are not whole UTF-8
 * characters (part of one, split across tokens).
 */
export function tokenFromBytes(bytes: readonly number[]): { token: string; bytes: number[] } {
  try {
    const token = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
    return { token, bytes: [...bytes] };
  } catch {
    const hex = bytes.map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
    return { token: `bytes:${hex}`, bytes: [...bytes] };
  }
}

/**
 * Bytes are tokens: ids 0..255 are UTF-8 bytes, and one more id ends the text. Decoding holds
 * back the bytes of a character that is not complete yet.
 */
export class ByteTokenizer implements Tokenizer {
  readonly exactTokenBytes = true;
  readonly addsSpecialTokens = false;

  constructor(readonly eosTokenId: number | undefined = 256) {}

  encode(text: string): number[] {
    return Array.from(Buffer.from(text, "utf8"));
  }

  count(text: string): number {
    return Buffer.byteLength(text, "utf8");
  }

  decode(ids: readonly number[]): string {
    return Buffer.from(ids.filter((id) => id < 256)).toString("utf8");
  }

  piece(id: number): string {
    return this.tokenText(id).token;
  }

  tokenText(id: number): { token: string; bytes: number[] } {
    return BYTE_TOKENS[id] ?? { token: "", bytes: [] };
  }

  tokenBytes(id: number): readonly number[] {
    return this.tokenText(id).bytes;
  }

  decoder() {
    const utf8 = new TextDecoder("utf-8");
    return {
      push: (id: number) => (id < 256 ? utf8.decode(Uint8Array.of(id), { stream: true }) : ""),
      flush: () => utf8.decode(),
    };
  }
}

/** Each byte as a token (computed once: logprobs ask for several per token generated). */
const BYTE_TOKENS = Array.from({ length: 256 }, (_, b) => tokenFromBytes([b]));
