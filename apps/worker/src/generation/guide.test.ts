import { ByteTokenizer } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { GrammarGuide } from "./guide.js";
import { JsonObjectGrammar } from "./json-grammar.js";
import { escapeRegex, RegexGrammar } from "./regex-grammar.js";

describe("GrammarGuide", () => {
  it("JSON: leaves the tokens that go on with an object, and the end of text once it is closed", () => {
    const guide = new GrammarGuide(new JsonObjectGrammar(), new ByteTokenizer(), 257);
    const allowed = () => {
      const logits = new Float32Array(257);
      guide.mask(logits);
      return [...logits.keys()].filter((id) => logits[id] === 0);
    };
    expect(allowed()).toEqual([0x09, 0x0a, 0x0d, 0x20, 0x7b]);
    for (const b of Buffer.from('{"a":1')) guide.advance(b);
    // the number goes on, or ends: a blank, a comma or the close
    expect(String.fromCharCode(...allowed())).toBe("\t\n\r ,.0123456789Ee}");
    guide.advance(0x7d);
    expect(allowed()).toEqual([256]);
  });

  it("choices (a regex of them): the next byte of every choice begun, and the end of text once one is whole", () => {
    const choices = ["yes", "no", "yesterday", "a.b"].map(escapeRegex).join("|");
    const guide = (drawn: string) => {
      const g = new GrammarGuide(new RegexGrammar(choices), new ByteTokenizer(), 257);
      for (const b of Buffer.from(drawn)) g.advance(b);
      const logits = new Float32Array(257);
      g.mask(logits);
      return [...logits.keys()].filter((id) => logits[id] === 0);
    };
    expect(guide("")).toEqual([...Buffer.from("any")]);
    expect(guide("yes")).toEqual([...Buffer.from("t"), 256]);
    expect(guide("no")).toEqual([256]);
    // a choice's "." is itself, not any character
    expect(guide("a")).toEqual([...Buffer.from(".")]);
  });
});
