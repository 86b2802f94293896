import { ByteTokenizer, type Tokenizer } from "@ferry/model-repository";
import { describe, expect, it } from "vitest";
import { type ByteGrammar, GrammarGuide } from "./guide.js";
import { JsonObjectGrammar } from "./json-grammar.js";
import { schemaToRegex } from "./json-schema-regex.js";
import { MaskCache } from "./mask-cache.js";
import { escapeRegex, RegexGrammar } from "./regex-grammar.js";
import { TokenSet } from "./token-set.js";

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

/**
 * A byte-level vocabulary like a BPE one: every byte, then pieces that span JSON's punctuation,
 * words with a leading space, numbers, escapes and characters cut in the middle.
 */
function pieceTokenizer(): Tokenizer & { size: number } {
  const pieces = [
    '{"',
    '":',
    '": "',
    '", "',
    '"}',
    "},",
    "}}",
    "[{",
    "]}",
    '"]',
    "[]",
    "{}",
    ' "',
    '\n  "',
    "  ",
    "name",
    "na",
    "me",
    " Jo",
    "hn",
    "true",
    "ull",
    "alse",
    "12",
    "3.",
    ".5",
    "e-",
    "E+",
    "0,",
    "-0",
    "\\u00",
    "e9",
    "\\n",
    '\\"',
    "é",
    "ü",
    "\xc3",
    '\xa9"',
    "a@",
    "@b",
    ".com",
    "com",
    "20",
    "-12-",
    "yes",
    "no",
    "yesterday",
    ", ",
    ',"',
  ].map((p) => [...Buffer.from(p, "latin1").toString("latin1")].map((c) => c.charCodeAt(0)));
  // "é" and "ü" as UTF-8 (the latin1 read above keeps the escaped halves as single bytes)
  pieces.push([...Buffer.from("é")], [...Buffer.from("ü")], [...Buffer.from("é")].slice(1));
  const vocab = [...Array.from({ length: 256 }, (_, b) => [b]), ...pieces];
  const eos = vocab.length;
  return {
    size: vocab.length + 1,
    eosTokenId: eos,
    exactTokenBytes: true,
    addsSpecialTokens: false,
    tokenText: (id) => {
      const bytes = vocab[id] ?? [];
      return { token: Buffer.from(bytes).toString("latin1"), bytes: [...bytes] };
    },
    encode: (text) => [...Buffer.from(text)],
    count: (text) => Buffer.byteLength(text),
    decoder: () => ({ push: () => "", flush: () => "" }),
    decode: (ids) => Buffer.from(ids.flatMap((id) => vocab[id] ?? [])).toString(),
    piece: (id) => Buffer.from(vocab[id] ?? []).toString("latin1"),
  };
}

/** The tokens a grammar takes from where it is, each tried alone on a copy (no trie, no cache). */
function allowedByHand(grammar: ByteGrammar, tokenizer: Tokenizer, size: number): number[] {
  const out: number[] = [];
  for (let id = 0; id < size; id++) {
    if (id === tokenizer.eosTokenId) {
      if (grammar.complete) out.push(id);
      continue;
    }
    const copy = grammar.copy();
    if (tokenizer.tokenText(id).bytes.every((b) => copy.feed(b))) out.push(id);
  }
  return out;
}

describe("GrammarGuide's masks (a trie walk, kept per state)", () => {
  const tokenizer = pieceTokenizer();
  const allowed = (guide: GrammarGuide) => {
    const logits = new Float32Array(tokenizer.size);
    guide.mask(logits);
    return [...logits.keys()].filter((id) => logits[id] === 0);
  };

  it("equal what trying every token alone gives, at every prefix of texts, masks of earlier states reused", () => {
    const json = [
      '{"name": "John", "age": 12.5e-3, "ok": true, "tags": ["a", "é"], "x": null}',
      '{\n  "a": [{"b": {}}, [], -0.5E+9, false],\n  "\\u00e9\\n\\"": "ü"}',
      '{"name":"Jo","n":[1,2,{"k":"yes"}]}',
      '{"a":{"b":{"c":[[["d"]]]}}}',
    ];
    const patterns: Array<[string, string[]]> = [
      ["[a-z]+@[a-z]+\\.com", ["ab@b.com", "a@bc.com"]],
      ["\\d{4}-\\d{2}-\\d{2}", ["2026-12-04"]],
      ["(yes|no|yesterday)", ["yes", "yesterday", "no"]],
      ['[^"]*é+', ["abé", "\u00fc\u00e9\u00e9"]],
      [
        schemaToRegex({
          type: "object",
          properties: { name: { type: "string" }, age: { type: "integer" } },
          required: ["name", "age"],
        }),
        ['{"name":"Jo é","age":12}', '{ "name" : "", "age" : -3 }'],
      ],
    ];
    const cases: Array<[() => ByteGrammar, string]> = [
      ...json.map((text) => [() => new JsonObjectGrammar(), text] as [() => ByteGrammar, string]),
      ...patterns.flatMap(([pattern, texts]) =>
        texts.map((text) => [() => new RegexGrammar(pattern), text] as [() => ByteGrammar, string]),
      ),
    ];
    let compared = 0;
    for (const [make, text] of cases) {
      const bytes = [...Buffer.from(text)];
      const guide = new GrammarGuide(make(), tokenizer, tokenizer.size);
      const reference = make();
      for (let at = 0; at <= bytes.length; at++) {
        // a grammar state by hand beside the guide's, both fed the same bytes
        expect(allowed(guide), `${text.slice(0, at)}|`).toEqual(
          allowedByHand(reference, tokenizer, tokenizer.size),
        );
        compared++;
        const b = bytes[at];
        if (b === undefined) break;
        guide.advance(b);
        expect(reference.feed(b)).toBe(true);
      }
      // a finished text allows the end, and only it where nothing may follow
      expect(allowed(guide)).toContain(tokenizer.eosTokenId);
    }
    expect(compared).toBeGreaterThan(300);
  });

  it("a mask outside the set goes to minus infinity, ids past the vocabulary too", () => {
    const set = new TokenSet(40);
    for (const id of [0, 31, 32, 39]) set.add(id);
    const logits = new Float32Array(45).fill(1);
    set.keepIn(logits);
    expect([...logits.keys()].filter((id) => logits[id] === 1)).toEqual([0, 31, 32, 39]);
  });

  it("the mask cache forgets the least recently used masks past its budget", () => {
    // room for three entries of one-letter states, not four
    const cache = new MaskCache(3 * (new TokenSet(64).bytes + 2 * "0 a".length + 64));
    const language = {};
    for (const state of ["a", "b", "c"]) cache.set(language, state, new TokenSet(64));
    cache.get(language, "a");
    cache.set(language, "d", new TokenSet(64));
    expect(cache.size).toBe(3);
    expect(cache.get(language, "b")).toBeUndefined();
    expect(cache.get(language, "a")).toBeDefined();
    // another language's state of the same name is another mask
    expect(cache.get({}, "a")).toBeUndefined();
  });
});
