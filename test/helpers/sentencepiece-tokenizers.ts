/**
 * Small tokenizer.json files in the two SentencePiece layouts no npm package ships here:
 * Llama 2's (BPE over `▁`-joined text with byte fallback, a decoder that strips the text's
 * first space) and T5's (a Unigram model with the Metaspace pre-tokenizer and decoder). Their
 * vocabularies are a few words; their configuration is the real models' own.
 */

const SPACE = "\u2581";

const added = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});

/** Words as BPE merges, one character at a time left to right (each prefix a token). */
function wordMerges(words: readonly string[]): { pieces: string[]; merges: string[] } {
  const pieces = new Set<string>();
  const merges: string[] = [];
  for (const word of words) {
    const chars = [...word];
    let prefix = chars[0] ?? "";
    pieces.add(prefix);
    for (const c of chars.slice(1)) {
      pieces.add(c);
      const merge = `${prefix} ${c}`;
      prefix += c;
      if (!pieces.has(prefix)) {
        merges.push(merge);
        pieces.add(prefix);
      }
    }
  }
  return { pieces: [...pieces], merges };
}

/**
 * Llama 2's layout: ids 0-2 `<unk>` `<s>` `</s>`, 3-258 the byte tokens `<0x00>`..`<0xFF>`,
 * then `words` (each with its leading `▁` where it starts a word) and their prefixes. Its
 * post-processor puts `<s>` first; characters outside the words fall back to bytes.
 */
export function llama2StyleTokenizerJson(words: readonly string[]) {
  const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (let b = 0; b < 256; b++)
    vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
  const { pieces, merges } = wordMerges(words);
  for (const piece of [SPACE, ...pieces]) vocab[piece] ??= Object.keys(vocab).length;
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Prepend", prepend: SPACE },
        { type: "Replace", pattern: { String: " " }, content: SPACE },
      ],
    },
    pre_tokenizer: null,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "<s>", type_id: 1 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
    },
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: SPACE }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ],
    },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "<unk>",
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

/**
 * T5's layout: a Unigram vocabulary (`<pad>` `</s>` `<unk>`, then `pieces` with their log
 * probabilities, `▁` marking a word's start), the Metaspace pre-tokenizer and decoder, and a
 * post-processor that ends every text with `</s>`.
 */
export function unigramTokenizerJson(pieces: ReadonlyArray<readonly [string, number]>) {
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [added(0, "<pad>"), added(1, "</s>"), added(2, "<unk>")],
    normalizer: {
      type: "Sequence",
      normalizers: [{ type: "Replace", pattern: { Regex: " {2,}" }, content: " " }],
    },
    pre_tokenizer: {
      type: "Metaspace",
      replacement: SPACE,
      prepend_scheme: "always",
      split: true,
    },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
        { Sequence: { id: "B", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
      ],
      special_tokens: { "</s>": { id: "</s>", ids: [1], tokens: ["</s>"] } },
    },
    decoder: { type: "Metaspace", replacement: SPACE, prepend_scheme: "always", split: true },
    model: {
      type: "Unigram",
      unk_id: 2,
      vocab: [["<pad>", 0], ["</s>", 0], ["<unk>", 0], ...pieces],
      byte_fallback: false,
    },
  };
}
