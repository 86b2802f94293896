import { describe, expect, it } from "vitest";
import { RegexError, RegexGrammar } from "./regex-grammar.js";

/** How far the grammar takes `text`: "whole", "prefix" (every byte taken) or "refused". */
function verdict(pattern: string, text: string): "whole" | "prefix" | "refused" {
  const grammar = new RegexGrammar(pattern);
  for (const b of Buffer.from(text)) if (!grammar.feed(b)) return "refused";
  return grammar.complete ? "whole" : "prefix";
}

describe("RegexGrammar", () => {
  it("matches whole texts as JavaScript's RegExp does, and takes every prefix of a match", () => {
    // each with texts it matches, beside the random ones (which mostly it does not)
    const patterns: Array<[string, string[]]> = [
      ["a*b", ["b", "aaab"]],
      ["(ab|a)*c?", ["", "abac", "aab"]],
      ["[a-c]{2,3}", ["ab", "cab"]],
      ["x?y+z*", ["y", "xyyzz"]],
      ["(a|b)*abb", ["abb", "babaabb"]],
      ["\\d{3}-\\d{2}", ["012-34"]],
      ["[^ab]+", ["xyz", "é c"]],
      ["a{0,2}b{2,}", ["bb", "aabbb"]],
      ["(?:ab)+|ba", ["abab", "ba"]],
      [".*c", ["c", "x{c"]],
      ["[\\w.]+@[a-c]+\\.(com|org)", ["x.y@ab.com", "0@c.org"]],
      ["é+|ü", ["éé", "ü"]],
      ["\\s*\\{\\s*\\}", ["{}", " {\n }"]],
      ["^(yes|no)$", ["yes", "no"]],
      ["[-a]+x{1}", ["-ax"]],
    ];
    const alphabet = [..."abcxyz01-@.éü {}\nmorg"];
    let seed = 11;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (const [pattern, examples] of patterns) {
      const reference = new RegExp(`^(?:${pattern})$`, "u");
      const randomTexts = Array.from({ length: 4_000 }, () =>
        Array.from(
          { length: Math.floor(random() * 9) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join(""),
      );
      for (const text of [...examples, ...randomTexts]) {
        const whole = reference.test(text);
        expect(verdict(pattern, text) === "whole", `${pattern} on ${JSON.stringify(text)}`).toBe(
          whole,
        );
        if (!whole) continue;
        const chars = [...text];
        for (let n = 0; n < chars.length; n++)
          expect(verdict(pattern, chars.slice(0, n).join("")), pattern).not.toBe("refused");
      }
      for (const text of examples) expect(verdict(pattern, text), pattern).toBe("whole");
    }
  });

  it("refuses the first byte of a character no match can take, within a character too", () => {
    expect(verdict("[é-ü]+x", "é")).toBe("prefix");
    const grammar = new RegexGrammar("[é-ü]+x");
    // é is C3 A9; a three-byte character's first byte cannot begin any of é-ü
    expect(grammar.copy().feed(0xc3)).toBe(true);
    expect(grammar.copy().feed(0xe2)).toBe(false);
    expect(grammar.copy().feed(0x78)).toBe(false);
    // no overlong form spells an ASCII letter: E0 81 A1 would decode to 'a'
    const a = new RegexGrammar("a");
    expect(a.copy().feed(0xe0)).toBe(false);
    const any = new RegexGrammar(".");
    const overlong = any.copy();
    expect(overlong.feed(0xe0) && overlong.feed(0x81)).toBe(false);
    const surrogate = any.copy();
    expect(surrogate.feed(0xed) && surrogate.feed(0xa0)).toBe(false);
  });

  it("refuses what it does not support, by name", () => {
    for (const [pattern, message] of [
      ["(?=a)b", /lookaround/],
      ["(a)\\1", /backreferences/],
      ["a\\bc", /word boundaries/],
      ["a|^b", /only at the start/],
      ["a{5,2}", /bad repetition/],
      ["(ab", /unclosed group/],
      ["[ab", /unclosed class/],
      ["a{2000}", /repetition over 1000/],
      ["*a", /nothing to repeat/],
      // a guide would have nothing to draw
      ["a[^\\s\\S]b|(?:[^\\s\\S])+", /matches nothing/],
    ] as const)
      expect(() => new RegexGrammar(pattern), pattern).toThrow(message);
    expect(() => new RegexGrammar("(")).toThrow(RegexError);
  });
});
