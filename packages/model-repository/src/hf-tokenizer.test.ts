import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { byteLevelTokenizerJson } from "../../../test/helpers/byte-level-tokenizer.js";
import { HfTokenizer } from "./hf-tokenizer.js";

/** A small byte-level BPE tokenizer.json in GPT-2's format, with a few merges. */
function writeTokenizerJson({
  bos = false,
  config = undefined as object | undefined,
} = {}): string {
  const merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r"];
  const dir = mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-tok-"));
  const path = join(dir, "tokenizer.json");
  writeFileSync(path, JSON.stringify(byteLevelTokenizerJson({ merges, bos })));
  if (config) writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
  return path;
}

describe("HfTokenizer (a Hugging Face tokenizer.json)", () => {
  it("encodes with the merges and decodes incrementally back to the same text", async () => {
    const tok = await HfTokenizer.load(writeTokenizerJson(), 263);
    const ids = tok.encode("hello world café");
    expect(ids.length).toBeLessThan("hello world café".length); // merges applied
    const decoder = tok.decoder();
    const pieces = ids.map((id) => decoder.push(id));
    expect(pieces.join("") + decoder.flush()).toBe("hello world café");
    // the two bytes of "é" come out as one piece, never as a replacement character
    expect(pieces.some((p) => p.includes("\uFFFD"))).toBe(false);
    expect(tok.eosTokenId).toBe(263);
  });

  it("gives each token's own text and bytes (logprobs): a merged piece's whole, part of a character as bytes", async () => {
    const tok = await HfTokenizer.load(writeTokenizerJson(), 263);
    const text = "hello world café";
    const texts = tok.encode(text).map((id) => tok.tokenText(id));
    expect(texts.flatMap((t) => t.bytes)).toEqual([...Buffer.from(text)]);
    // exact, so text can be spelled token by token (guided decoding)
    expect(tok.exactTokenBytes).toBe(true);
    expect(texts.some((t) => t.token === "hello")).toBe(true);
    // "é" is two bytes and, unmerged here, two tokens: neither is a character alone
    expect(texts.slice(-2)).toEqual([
      { token: "bytes:\\xc3", bytes: [0xc3] },
      { token: "bytes:\\xa9", bytes: [0xa9] },
    ]);
    // the special token (id 262: 256 bytes and 6 merges before it)
    expect(tok.tokenText(262)).toEqual({
      token: "<|endoftext|>",
      bytes: [...Buffer.from("<|endoftext|>")],
    });
  });

  it("adds the post-processor's special tokens only when asked (vLLM's add_special_tokens), and decodes them back", async () => {
    // Llama's way: a BOS before every sequence, here <|endoftext|> (id 262)
    const tok = await HfTokenizer.load(writeTokenizerJson({ bos: true }), 262);
    const plain = tok.encode("hello world");
    expect(tok.encode("hello world", true)).toEqual([262, ...plain]);
    expect(tok.decode([262, ...plain])).toBe("<|endoftext|>hello world");
    // as the vocabulary writes them: GPT-2's byte alphabet (a space is "Ġ")
    expect(plain.map((id) => tok.piece(id))).toEqual(["hello", "Ġw", "or", "l", "d"]);
  });

  it("reads tokenizer_config.json beside it: its eos_token (an AddedToken object too) where model.json names none", async () => {
    const config = { eos_token: { __type: "AddedToken", content: "<|endoftext|>" } };
    expect((await HfTokenizer.load(writeTokenizerJson({ config }))).eosTokenId).toBe(262);
    expect((await HfTokenizer.load(writeTokenizerJson({ config }), 7)).eosTokenId).toBe(7);
    expect((await HfTokenizer.load(writeTokenizerJson())).eosTokenId).toBeUndefined();
  });
});
