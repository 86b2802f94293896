import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Tokenizer as Reference } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import {
  ALL_TEXTS,
  REAL_TOKENIZERS,
  TEXTS,
  WORDPIECE_TOKENIZER,
} from "../../../test/helpers/tokenizer-texts.js";
import { HfTokenizer } from "./hf-tokenizer.js";

/** The library's own tokenizer for a file, with its tokenizer_config.json as transformers.js reads it. */
function reference(path: string): Reference {
  const json = JSON.parse(readFileSync(path, "utf8"));
  const config = JSON.parse(readFileSync(join(dirname(path), "tokenizer_config.json"), "utf8"));
  return new Reference(json, config);
}

/** Generated text as the library decodes it: special tokens out, no transformers clean-up. */
const TEXT = { skip_special_tokens: true, clean_up_tokenization_spaces: false };

/** Each file loaded once for the whole file (Gemma 3's takes seconds). */
const loaded = new Map<string, Promise<HfTokenizer>>();
function load(path: string): Promise<HfTokenizer> {
  let tok = loaded.get(path);
  if (!tok) {
    tok = HfTokenizer.load(path);
    loaded.set(path, tok);
  }
  return tok;
}

/** Pushes every id through a fresh stream decoder: its pieces, the flush last. */
function stream(tok: HfTokenizer, ids: readonly number[], context?: readonly number[]): string[] {
  const decoder = tok.decoder(context);
  return [...ids.map((id) => decoder.push(id)), decoder.flush()];
}

const utf8 = (bytes: ReadonlyArray<readonly number[]>) =>
  Buffer.from(bytes.flatMap((b) => [...b])).toString("utf8");

const CASES = [...Object.entries(TEXTS), ["all of them", ALL_TEXTS]] as const;

describe.each(Object.entries(REAL_TOKENIZERS))("%s", (_name, path) => {
  let tok: HfTokenizer;
  let ref: Reference;
  beforeAll(async () => {
    tok = await load(path);
    ref = reference(path);
  });

  it.each(CASES)("encodes %s as the library does, with and without special tokens", (_, text) => {
    expect(tok.encode(text)).toEqual(ref.encode(text, { add_special_tokens: false }).ids);
    expect(tok.encode(text, true)).toEqual(ref.encode(text).ids);
    expect(tok.count(text)).toBe(tok.encode(text).length);
  });

  it.each(CASES)("streams %s back to itself, never a U+FFFD midway", (_, text) => {
    const ids = tok.encode(text);
    const pieces = stream(tok, ids);
    // the library's full decode, which for these lossless tokenizers is the text itself
    expect(pieces.join("")).toBe(ref.decode(ids, TEXT));
    expect(pieces.join("")).toBe(text);
    for (const piece of pieces) expect(piece).not.toContain("\uFFFD");
    expect(tok.decode(ids)).toBe(text);
  });

  it.each(CASES)("continues %s after a prompt as the whole text has it", (_, text) => {
    const ids = tok.encode(text);
    // the first boundary past the middle where the prompt's text is whole characters
    let cut = Math.floor(ids.length / 2);
    while (cut < ids.length && tok.decode(ids.slice(0, cut)).endsWith("\uFFFD")) cut++;
    const prompt = tok.decode(ids.slice(0, cut));
    expect(stream(tok, ids.slice(cut), ids.slice(0, cut)).join("")).toBe(text.slice(prompt.length));
  });

  it.each(CASES)("spells each token of %s: their bytes joined are the text", (_, text) => {
    const ids = tok.encode(text);
    expect(tok.exactTokenBytes).toBe(true);
    expect(utf8(ids.map((id) => tok.tokenBytes(id)))).toBe(text);
    // logprobs: a token's own text where its bytes are whole characters, else OpenAI's bytes:
    for (const id of ids) {
      const { token, bytes } = tok.tokenText(id);
      expect(bytes).toEqual([...tok.tokenBytes(id)]);
      if (!token.startsWith("bytes:")) expect(Buffer.from(bytes).toString("utf8")).toBe(token);
    }
  });
});

describe("a token split over UTF-8 characters", () => {
  it("byte-level (Qwen3): U+200D's three bytes in two tokens wait for each other", async () => {
    const tok = await load(REAL_TOKENIZERS["Qwen3 (byte-level BPE)"]);
    const ids = tok.encode("👨‍👩");
    const texts = ids.map((id) => tok.tokenText(id).token);
    expect(texts).toContain("bytes:\\xe2\\x80");
    expect(texts).toContain("bytes:\\x8d");
    const pieces = stream(tok, ids);
    expect(pieces.filter((p) => p === "").length).toBeGreaterThan(1);
    expect(pieces.join("")).toBe("👨‍👩");
  });

  it("byte fallback (Gemma 3): a character outside the vocabulary is four byte tokens, one piece", async () => {
    const tok = await load(REAL_TOKENIZERS["Gemma 3 (SentencePiece BPE, byte fallback)"]);
    const ids = tok.encode("𓀀");
    expect(ids.map((id) => tok.piece(id))).toEqual(["<0xF0>", "<0x93>", "<0x80>", "<0x80>"]);
    expect(ids.map((id) => tok.tokenBytes(id))).toEqual([[0xf0], [0x93], [0x80], [0x80]]);
    expect(tok.tokenText(ids[0] ?? -1)).toEqual({ token: "bytes:\\xf0", bytes: [0xf0] });
    expect(stream(tok, ids)).toEqual(["", "", "", "𓀀", ""]);
  });
});

describe("Qwen3's special and added tokens", () => {
  let tok: HfTokenizer;
  beforeAll(async () => {
    tok = await load(REAL_TOKENIZERS["Qwen3 (byte-level BPE)"]);
  });

  it("reads a chat's special tokens as one id each; generated text leaves them out, logprobs name them", () => {
    const ids = tok.encode("<|im_start|>user\nHi<|im_end|>");
    expect(ids[0]).toBe(151644);
    expect(ids.at(-1)).toBe(151645);
    expect(stream(tok, ids).join("")).toBe("user\nHi");
    expect(tok.decode(ids)).toBe("<|im_start|>user\nHi<|im_end|>");
    expect(tok.tokenText(151645)).toEqual({
      token: "<|im_end|>",
      bytes: [...Buffer.from("<|im_end|>")],
    });
    // XGrammar never offers a token that spells nothing
    expect(tok.tokenBytes(151645)).toEqual([]);
  });

  it("keeps its non-special added tokens in text (<think>), and ends text where its config says", () => {
    const [think] = tok.encode("<think>");
    expect(think).toBe(151667);
    expect(stream(tok, [think ?? -1]).join("")).toBe("<think>");
    expect(tok.tokenBytes(think ?? -1)).toEqual([...Buffer.from("<think>")]);
    // model.json names none here: tokenizer_config.json's eos_token
    expect(tok.eosTokenId).toBe(151645);
  });

  it("normalizes to NFC first: a decomposed accent encodes as the composed one", () => {
    expect(tok.encode("Cafe\u0301")).toEqual(tok.encode("Café"));
  });

  it("spells nothing past its vocabulary (a model's logits padded to 151,936)", () => {
    expect(tok.tokenBytes(151_900)).toEqual([]);
    expect(tok.tokenText(151_900)).toEqual({ token: "", bytes: [] });
    expect(stream(tok, [...tok.encode("a"), 151_900, ...tok.encode("b")]).join("")).toBe("ab");
  });
});

describe("Llama 3 and Gemma 3 specifics", () => {
  it("Llama 3: no transformers clean-up, though its config asks for it (text stays as written)", async () => {
    const tok = await load(REAL_TOKENIZERS["Llama 3 (byte-level BPE)"]);
    const text = "x = a ? b : c , and it 's";
    expect(stream(tok, tok.encode(text)).join("")).toBe(text);
    expect(tok.eosTokenId).toBe(128001);
  });

  it("Gemma 3: ▁ is a space mid-text, and the post-processor's <bos> comes only when asked", async () => {
    const tok = await load(REAL_TOKENIZERS["Gemma 3 (SentencePiece BPE, byte fallback)"]);
    const ids = tok.encode("Hello world");
    expect(ids.map((id) => tok.piece(id))).toEqual(["Hello", "▁world"]);
    expect(tok.tokenText(ids[1] ?? -1).token).toBe(" world");
    expect(stream(tok, ids)).toEqual(["Hello", " world", ""]);
    expect(tok.addsSpecialTokens).toBe(true);
    expect(tok.encode("Hello world", true)).toEqual([2, ...ids]);
    expect(tok.eosTokenId).toBe(106); // <end_of_turn>
  });
});

describe("WordPiece (BERT-style, models/build/wordpiece)", () => {
  let tok: HfTokenizer;
  let ref: Reference;
  beforeAll(async () => {
    tok = await load(WORDPIECE_TOKENIZER);
    ref = reference(WORDPIECE_TOKENIZER);
  });

  it.each(CASES)("encodes %s as the library does, [CLS] and [SEP] when asked", (_, text) => {
    expect(tok.encode(text)).toEqual(ref.encode(text, { add_special_tokens: false }).ids);
    const withSpecial = tok.encode(text, true);
    expect(withSpecial).toEqual(ref.encode(text).ids);
    expect(tok.piece(withSpecial[0] ?? -1)).toBe("[CLS]");
    expect(tok.piece(withSpecial.at(-1) ?? -1)).toBe("[SEP]");
  });

  it.each(CASES)(
    "streams %s as the library decodes it; each token's bytes are its part",
    (_, text) => {
      const ids = tok.encode(text, true);
      const full = ref.decode(ids, TEXT);
      const pieces = stream(tok, ids);
      expect(pieces.join("")).toBe(full);
      // past the first word, a token adds what it spells: its word with a space, a ## piece
      // joined; [CLS], [SEP] and [UNK] nothing
      const [first, ...rest] = ids.filter((id) => tok.tokenBytes(id).length > 0);
      const start = first === undefined ? "" : ref.decode([first], TEXT);
      expect(full.startsWith(start)).toBe(true);
      expect(utf8(rest.map((id) => tok.tokenBytes(id)))).toBe(full.slice(start.length));
    },
  );

  it("joins ## continuations, lowercases, strips accents; unknown words are left out", () => {
    const ids = tok.encode("Tokenization is UNBELIEVABLY hard: café 你");
    const pieces = ids.map((id) => tok.piece(id));
    expect(pieces.some((p) => p.startsWith("##"))).toBe(true);
    expect(pieces).toContain("[UNK]");
    const continuation = ids.find((id) => tok.piece(id).startsWith("##")) ?? -1;
    expect(tok.tokenText(continuation).token).toBe(tok.piece(continuation).slice(2));
    expect(stream(tok, ids).join("")).toBe("tokenization is unbelievably hard : cafe");
    expect(tok.exactTokenBytes).toBe(true);
  });
});
