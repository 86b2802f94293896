import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** GPT-2's byte -> printable character table, which byte-level BPE vocabularies are written in. */
function byteAlphabet(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) =>
    String.fromCharCode(printable(b) ? b : 256 + extra++),
  );
}

/**
 * A Hugging Face tokenizer.json (byte-level BPE, no merges) with tiny-lm's own vocabulary
 * (ids 0-255 are bytes, 256 `<|endoftext|>`) whose post-processor puts 256 before every text,
 * as Llama's puts its BOS: tiny-lm as a user's export whose tokenizer adds special tokens.
 */
export function writeBosTokenizer(modelDir: string): void {
  const vocab: Record<string, number> = {};
  byteAlphabet().forEach((c, b) => {
    vocab[c] = b;
  });
  const bos = "<|endoftext|>";
  vocab[bos] = 256;
  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  const special = { SpecialToken: { id: bos, type_id: 0 } };
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: 256,
        content: bos,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      },
    ],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: {
      type: "TemplateProcessing",
      single: [special, { Sequence: { id: "A", type_id: 0 } }],
      pair: [special, { Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { [bos]: { id: bos, ids: [256], tokens: [bos] } },
    },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: [],
    },
  };
  writeFileSync(join(modelDir, "tokenizer.json"), JSON.stringify(json));
}
