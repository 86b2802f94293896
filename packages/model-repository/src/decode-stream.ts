/** Tokens of a context that a stream decodes its first tokens after (vLLM reads 5 too). */
const CONTEXT_TOKENS = 5;

const REPLACEMENT = "\uFFFD";

/**
 * The text of a growing token sequence, a piece per token, for decoders whose text of a
 * sequence is only known in context (Hugging Face's DecodeStream, vLLM's incremental
 * detokenizer): each push decodes a short window (the tokens of the last piece given, and
 * those since) and gives what the window's text gained. So a SentencePiece `▁` mid-sequence
 * is a space while the first token of a sequence loses it, as the full decode has it, and
 * WordPiece's `##` joins; a piece whose text ends in U+FFFD (a UTF-8 character split over
 * tokens, or byte-fallback bytes still to come) waits for the token that completes it.
 * Decoding whole sequences each time would cost the square of their length.
 */
export class DecodeStream {
  /** The window: tokens whose text is given already (the first `read`), then those since. */
  private ids: number[];
  private read: number;
  private readText: string;

  /**
   * `context`: the tokens before the first one pushed (a prompt), so that the first token
   * reads as it does mid-sequence (a continuation's leading space); only the last few are kept.
   */
  constructor(
    private readonly decode: (ids: readonly number[]) => string,
    context: readonly number[] = [],
  ) {
    this.ids = context.slice(-CONTEXT_TOKENS);
    // a context ending inside a character would never read as a prefix again
    while (this.ids.length > 0 && decode(this.ids).endsWith(REPLACEMENT)) this.ids.pop();
    this.read = this.ids.length;
    this.readText = this.ids.length > 0 ? decode(this.ids) : "";
  }

  /** The text `id` completes: "" while it waits for more (a partial character, a skipped token). */
  push(id: number): string {
    this.ids.push(id);
    const text = this.decode(this.ids);
    if (
      text.length <= this.readText.length ||
      text.endsWith(REPLACEMENT) ||
      !text.startsWith(this.readText)
    )
      return "";
    const piece = text.slice(this.readText.length);
    this.ids = this.ids.slice(this.read);
    this.read = this.ids.length;
    this.readText = this.decode(this.ids);
    return piece;
  }

  /** What is left once the sequence ends (a character never completed reads as U+FFFD). */
  flush(): string {
    if (this.ids.length === this.read) return "";
    const text = this.decode(this.ids);
    const rest = text.startsWith(this.readText) ? text.slice(this.readText.length) : "";
    this.read = this.ids.length;
    this.readText = text;
    return rest;
  }
}
