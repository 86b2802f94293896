import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** GPT-2's byte -> printable character table, which byte-level BPE vocabularies are written in. */
export function byteAlphabet(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) =>
    String.fromCharCode(printable(b) ? b : 256 + extra++),
  );
}

const END = "<|endoftext|>";

/**
 * A Hugging Face tokenizer.json in GPT-2's byte-level BPE format: ids 0-255 are the bytes,
 * then one id per merge ("h e" -> "he"), then `<|endoftext|>`. With `bos`, its post-processor
 * puts `<|endoftext|>` before every text, as Llama's puts its BOS.
 */
export function byteLevelTokenizerJson({ merges = [] as string[], bos = false } = {}) {
  const vocab: Record<string, number> = {};
  byteAlphabet().forEach((c, b) => {
    vocab[c] = b;
  });
  for (const m of merges) vocab[m.replace(" ", "")] = Object.keys(vocab).length;
  const end = Object.keys(vocab).length;
  vocab[END] = end;
  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  const special = { SpecialToken: { id: END, type_id: 0 } };
  const sequence = (id: string, type_id: number) => ({ Sequence: { id, type_id } });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: end,
        content: END,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      },
    ],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: bos
      ? {
          type: "TemplateProcessing",
          single: [special, sequence("A", 0)],
          pair: [special, sequence("A", 0), sequence("B", 1)],
          special_tokens: { [END]: { id: END, ids: [end], tokens: [END] } },
        }
      : null,
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
      merges,
    },
  };
}

/**
 * tiny-lm's own vocabulary (ids 0-255 bytes, 256 `<|endoftext|>`) as a tokenizer.json whose
 * post-processor adds 256 first: tiny-lm as a user's export whose tokenizer adds a BOS.
 */
export function writeBosTokenizer(modelDir: string): void {
  writeFileSync(
    join(modelDir, "tokenizer.json"),
    JSON.stringify(byteLevelTokenizerJson({ bos: true })),
  );
}
