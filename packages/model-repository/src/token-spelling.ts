import { byteLevelBytes } from "./byte-level.js";

/**
 * Decoder steps under which a token adds the same text wherever it stands past the first
 * (a SentencePiece `▁` reads as a space, a WordPiece `##` joins, a byte stays a byte). Not so
 * `BPEDecoder` (an end-of-word suffix is a space only before another token) or `CTC`
 * (repeats merge).
 */
const LOCAL_STEPS = new Set([
  "ByteLevel",
  "ByteFallback",
  "Fuse",
  "Replace",
  "Metaspace",
  "Strip",
  "WordPiece",
]);

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

/** Texts an anchor is looked for in: a plain word every vocabulary has one of. */
const ANCHORS = ["a", "the", "0", "."];

/** What spelling tokens needs of a tokenizer. */
export interface SpellingSource {
  /** A token as its vocabulary writes it; undefined past the vocabulary. */
  piece(id: number): string | undefined;
  /** Ids' text as generated text has it (special tokens left out). */
  text(ids: readonly number[]): string;
  encode(text: string): number[];
}

/**
 * The bytes each token adds to generated text, for logprobs and guided decoding (XGrammar
 * spells text with them): a byte-level piece's bytes through GPT-2's alphabet, a byte-fallback
 * token's one byte, a special token none, any other token the text it adds after a plain word
 * (its `▁` a space, its `##` gone), as a stream decoding it would give.
 */
export class TokenSpelling {
  /** Whether every token's bytes are exact: the text of tokens is their bytes joined. */
  readonly exact: boolean;
  private readonly byteLevel: boolean;
  private readonly byteFallback: boolean;
  private readonly anchor: number[];
  private readonly anchorText: string;

  constructor(
    private readonly source: SpellingSource,
    /** tokenizer.json's `decoder`. */
    decoder: unknown,
    /** Tokens generated text leaves out. */
    private readonly special: ReadonlySet<number>,
    /** Added tokens: a byte-level decoder gives their text as it is, not through its alphabet. */
    private readonly added: ReadonlySet<number>,
  ) {
    const steps = decoderSteps(decoder);
    this.exact = steps.every((step) => LOCAL_STEPS.has(step));
    this.byteLevel = steps.includes("ByteLevel");
    this.byteFallback = steps.includes("ByteFallback");
    this.anchor = this.findAnchor();
    this.anchorText = this.anchor.length > 0 ? source.text(this.anchor) : "";
  }

  /**
   * Not kept: guided decoding reads each token once (a large vocabulary's would be megabytes
   * of small arrays), and logprobs keep their own.
   */
  bytes(id: number): number[] {
    const piece = this.source.piece(id);
    if (piece === undefined || this.special.has(id)) return [];
    if (this.byteLevel && !this.added.has(id)) {
      const bytes = byteLevelBytes(piece);
      if (bytes) return bytes;
    }
    const byte = this.byteFallback ? BYTE_TOKEN.exec(piece) : null;
    if (byte?.[1]) return [Number.parseInt(byte[1], 16)];
    return [...Buffer.from(this.textAfterAnchor(id), "utf8")];
  }

  /** The text `id` adds after the anchor: how it reads past the start of a sequence. */
  private textAfterAnchor(id: number): string {
    const text = this.source.text([...this.anchor, id]);
    return text.startsWith(this.anchorText)
      ? text.slice(this.anchorText.length)
      : this.source.text([id]);
  }

  private findAnchor(): number[] {
    for (const word of ANCHORS) {
      const ids = this.source.encode(word);
      if (ids.length > 0 && !ids.some((id) => this.special.has(id)) && this.source.text(ids))
        return ids;
    }
    return [];
  }
}

/** The types of a decoder's steps, a Sequence's flattened; none for no decoder. */
function decoderSteps(decoder: unknown): string[] {
  if (!decoder || typeof decoder !== "object") return [];
  const { type, decoders } = decoder as { type?: unknown; decoders?: unknown };
  if (type === "Sequence" && Array.isArray(decoders)) return decoders.flatMap(decoderSteps);
  return [String(type)];
}
