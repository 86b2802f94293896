import { describe, expect, it } from "vitest";
import { ByteTokenizer, tokenFromBytes } from "./tokenizer.js";

describe("a token as a client reads it", () => {
  it("is its text when its bytes are whole characters, else OpenAI's bytes: form", () => {
    expect(tokenFromBytes([104, 105])).toEqual({ token: "hi", bytes: [104, 105] });
    expect(tokenFromBytes([0xc3, 0xa9])).toEqual({ token: "é", bytes: [0xc3, 0xa9] });
    expect(tokenFromBytes([0xc3])).toEqual({ token: "bytes:\\xc3", bytes: [0xc3] });
  });

  it("is one byte for the byte-level tokenizer, and nothing for its end of text", () => {
    const tok = new ByteTokenizer(256);
    expect(tok.tokenText(65)).toEqual({ token: "A", bytes: [65] });
    expect(tok.tokenText(0xff)).toEqual({ token: "bytes:\\xff", bytes: [0xff] });
    expect(tok.tokenText(256)).toEqual({ token: "", bytes: [] });
  });
});
