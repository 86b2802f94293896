import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer as Reference } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import {
  llama2StyleTokenizerJson,
  unigramTokenizerJson,
} from "../../../test/helpers/sentencepiece-tokenizers.js";
import { TEXTS } from "../../../test/helpers/tokenizer-texts.js";
import { HfTokenizer } from "./hf-tokenizer.js";

const TEXT = { skip_special_tokens: true, clean_up_tokenization_spaces: false };

async function loadJson(json: object): Promise<HfTokenizer> {
  const path = join(
    mkdtempSync(join(process.env.FERRY_TEST_TMP ?? tmpdir(), "ferry-sp-")),
    "tokenizer.json",
  );
  writeFileSync(path, JSON.stringify(json));
  return HfTokenizer.load(path);
}

function stream(tok: HfTokenizer, ids: readonly number[], context?: readonly number[]): string[] {
  const decoder = tok.decoder(context);
  return [...ids.map((id) => decoder.push(id)), decoder.flush()];
}

const SAMPLES = [
  "Hello world!",
  "Hello, café world",
  "  Hello   world  ",
  ...Object.values(TEXTS),
] as const;

describe("SentencePiece BPE as Llama 2 lays it out (▁, byte fallback, the first space stripped)", () => {
  const json = llama2StyleTokenizerJson(["▁Hello", "▁world", "▁the", ",", "!", "▁caf"]);
  const ref = new Reference(json, {});
  let tok: HfTokenizer;
  beforeAll(async () => {
    tok = await loadJson(json);
  });

  it.each(SAMPLES)("encodes and streams %j as the library does", (text) => {
    const ids = tok.encode(text);
    expect(ids).toEqual(ref.encode(text, { add_special_tokens: false }).ids);
    expect(tok.encode(text, true)).toEqual([1, ...ids]);
    const pieces = stream(tok, ids);
    expect(pieces.join("")).toBe(ref.decode(ids, TEXT));
    for (const piece of pieces) expect(piece).not.toContain("\uFFFD");
  });

  it("strips the text's first space as the full decode does; with the prompt as context, keeps it", () => {
    const ids = tok.encode("Hello, Hello world");
    expect(stream(tok, ids)).toEqual(["Hello", ",", " Hello", " world", ""]);
    // a continuation: " Hello world" after "Hello," reads with its space
    const cut = 2;
    expect(stream(tok, ids.slice(cut)).join("")).toBe("Hello world");
    expect(stream(tok, ids.slice(cut), ids.slice(0, cut)).join("")).toBe(" Hello world");
  });

  it("spells ▁ as a space and a byte token as its byte, so that é is two tokens of one character", () => {
    const ids = tok.encode("café");
    expect(ids.map((id) => tok.piece(id))).toEqual(["▁caf", "<0xC3>", "<0xA9>"]);
    expect(ids.map((id) => [...tok.tokenBytes(id)])).toEqual([
      [0x20, 0x63, 0x61, 0x66],
      [0xc3],
      [0xa9],
    ]);
    expect(ids.map((id) => tok.tokenText(id).token)).toEqual([
      " caf",
      "bytes:\\xc3",
      "bytes:\\xa9",
    ]);
    expect(stream(tok, ids)).toEqual(["caf", "", "é", ""]);
    expect(tok.exactTokenBytes).toBe(true);
    expect(tok.tokenBytes(1)).toEqual([]); // <s>
  });

  it("a prompt that ends inside a character does not hold the stream up", () => {
    const ids = tok.encode("café world");
    const inside = ids.indexOf(tok.encode("café")[1] ?? -1) + 1; // after <0xC3>
    // the context is read up to its last whole character ("caf"): é's second byte alone
    // cannot complete it, and the text after it still comes
    expect(stream(tok, ids.slice(inside), ids.slice(0, inside)).join("")).toBe("\uFFFD world");
    // and a word after such a context reads mid-text, with its space
    expect(stream(tok, ids.slice(-1), ids.slice(0, inside))).toEqual([" world", ""]);
  });
});

describe("Unigram as T5 lays it out (Metaspace)", () => {
  const json = unigramTokenizerJson([
    ["▁", -2],
    ["▁hello", -4],
    ["▁world", -4],
    ["▁wor", -6],
    ["ld", -6],
    ["▁H", -7],
    ...[..."helowrdcaf"].map((c) => [c, -8] as const),
    ["é", -9],
    ["!", -5],
    [",", -5],
  ]);
  const ref = new Reference(json, {});
  let tok: HfTokenizer;
  beforeAll(async () => {
    tok = await loadJson(json);
  });

  it.each(SAMPLES)("encodes and streams %j as the library does", (text) => {
    const ids = tok.encode(text);
    expect(ids).toEqual(ref.encode(text, { add_special_tokens: false }).ids);
    expect(tok.encode(text, true)).toEqual([...ids, 1]); // </s>
    expect(stream(tok, ids).join("")).toBe(ref.decode(ids, TEXT));
  });

  it("reads the best segmentation, ▁ as a word's space, an unknown piece as nothing", () => {
    const ids = tok.encode("hello world!");
    expect(ids.map((id) => tok.piece(id))).toEqual(["▁hello", "▁world", "!"]);
    expect(ids.map((id) => tok.tokenText(id).token)).toEqual([" hello", " world", "!"]);
    expect(stream(tok, ids)).toEqual(["hello", " world", "!", ""]);
    expect(tok.tokenBytes(2)).toEqual([]); // <unk>
    expect(tok.exactTokenBytes).toBe(true);
  });
});
