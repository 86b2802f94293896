import { readFileSync } from "node:fs";
import { Tokenizer as HfTokenizerImpl } from "@huggingface/tokenizers";
import { describe, expect, it } from "vitest";
import { HfTokenizer } from "./hf-tokenizer.js";

const PATH = "models/bert-fortunes/tokenizer.json";

describe("WordPiece with its tries bounded by the longest token", () => {
  it("cuts every word as the library's own does: the same pieces, [UNK]s and ids", async () => {
    const bounded = await HfTokenizer.load(PATH);
    const library = new HfTokenizerImpl(JSON.parse(readFileSync(PATH, "utf8")), {});
    // common and rare letters, accents, digits, punctuation, CJK, emoji (two UTF-16 units)
    const alphabet = [..."etaoinshrdluqxzjvkwéüñ0123456789-'.,!漢字😀🎉"];
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // and words made of the vocabulary's own pieces, so that long pieces match
    const vocab = Object.keys(
      (JSON.parse(readFileSync(PATH, "utf8")) as { model: { vocab: Record<string, number> } }).model
        .vocab,
    ).filter((token) => !token.startsWith("[") && token.replace(/^##/, "").length > 0);
    const pieceOf = () => (vocab[Math.floor(next() * vocab.length)] ?? "").replace(/^##/, "");
    for (let round = 0; round < 600; round++) {
      const words = Array.from({ length: 1 + Math.floor(next() * 8) }, () => {
        if (round % 2 === 0)
          return Array.from({ length: 1 + Math.floor(next() * 5) }, pieceOf).join("");
        // lengths about the 100-character limit too
        const length = 1 + Math.floor(next() ** 2 * 110);
        return Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]).join(
          "",
        );
      });
      const text = words.join(" ");
      expect(bounded.encode(text, true), text).toEqual(
        library.encode(text, { add_special_tokens: true }).ids,
      );
    }
    for (const text of ["fortune favours the bold", "unaffable", "x".repeat(100), "x".repeat(101)])
      expect(bounded.encode(text)).toEqual(library.encode(text, { add_special_tokens: false }).ids);
  });
});
