import { describe, expect, it } from "vitest";
import { JsonObjectGrammar } from "./json-grammar.js";

/** How far the grammar takes `text`: "whole", "prefix" (every byte taken, not done) or "refused". */
function verdict(text: string): "whole" | "prefix" | "refused" {
  const grammar = new JsonObjectGrammar();
  for (const b of Buffer.from(text)) if (!grammar.feed(b)) return "refused";
  return grammar.complete ? "whole" : "prefix";
}

describe("JsonObjectGrammar", () => {
  it("takes JSON objects byte by byte, every prefix of them, and is done at their end", () => {
    const objects = [
      {},
      { a: 1 },
      { 'k"ey': "caf\u00e9 \u{1f600} \\ / \n\t", n: [-0.5e10, 0, 12.25, 1e-7, []] },
      { deep: { er: [{ x: [true, false, null] }, "s"] }, e: {} },
    ];
    for (const object of objects)
      for (const text of [JSON.stringify(object), JSON.stringify(object, null, 1)]) {
        expect(verdict(text), text).toBe("whole");
        for (let n = 0; n < Buffer.byteLength(text); n++)
          expect(verdict(text.slice(0, n)), text.slice(0, n)).not.toBe("refused");
      }
    expect(verdict('{"a":"\\u00e9","b":-1E+2}')).toBe("whole");
  });

  it("refuses what no JSON object goes on with", () => {
    for (const text of [
      "[1]",
      '"s"',
      "1",
      '{"a" 1}',
      '{"a":01}',
      '{"a":1.}',
      '{"a":tru}',
      '{"a":"\u0001"}',
      '{"a":"\\x"}',
      "{,}",
      '{"a":1,}',
      "[}",
      '{"a":[1}',
      "{} ",
      "{}{}",
      '{"a":1}x',
      `{${" ".repeat(17)}}`,
      `${"{".repeat(1)}"a":${"[".repeat(32)}`,
    ])
      expect(verdict(text), text).toBe("refused");
  });

  it("takes only well-formed UTF-8 in strings: no overlong form, surrogate or lone continuation", () => {
    const inString = (bytes: number[]) => {
      const grammar = new JsonObjectGrammar();
      return [...Buffer.from('{"a":"'), ...bytes].every((b) => grammar.feed(b));
    };
    expect(inString([0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80])).toBe(true);
    expect(inString([0xe0, 0x81])).toBe(false);
    expect(inString([0xed, 0xa0])).toBe(false);
    expect(inString([0xf4, 0x90])).toBe(false);
    expect(inString([0x80])).toBe(false);
    expect(inString([0xc1])).toBe(false);
  });

  it("agrees with JSON.parse on random objects, and on each with one byte changed", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const value = (depth: number): unknown => {
      const kind = depth > 2 ? pick(["n", "s", "l"]) : pick(["n", "s", "l", "a", "o"]);
      if (kind === "n") return pick([0, -1, 3.25, 1e21, -0.5, 1e-7, 123456789]);
      if (kind === "s") return pick(["", "a b", 'q"uote', "back\\slash", "\u00e9t\u00e9", "tab\t"]);
      if (kind === "l") return pick([true, false, null]);
      if (kind === "a")
        return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
      return object(depth + 1);
    };
    const object = (depth: number) =>
      Object.fromEntries(
        Array.from({ length: Math.floor(random() * 3) }, (_, k) => [`k${k}`, value(depth)]),
      );
    const alphabet = [...'{}[]":,0-1.eE+tfnrulsa \\\n'];
    let whole = 0;
    for (let k = 0; k < 3_000; k++) {
      const text = JSON.stringify(object(0), null, pick([undefined, 1, 2]));
      expect(verdict(text), text).toBe("whole");
      const at = Math.floor(random() * text.length);
      const change = pick(["delete", "replace", "insert"]);
      const mutated =
        text.slice(0, at) +
        (change === "delete" ? "" : pick(alphabet)) +
        text.slice(change === "insert" ? at : at + 1);
      let parsed: unknown;
      try {
        parsed = JSON.parse(mutated);
      } catch {
        parsed = undefined;
      }
      // JSON.parse takes blanks after the object too; the grammar ends with it
      const isObject =
        typeof parsed === "object" &&
        parsed !== null &&
        !Array.isArray(parsed) &&
        /\}$/.test(mutated);
      expect(verdict(mutated) === "whole", mutated).toBe(isObject);
      if (isObject) whole++;
    }
    // the changed texts hold objects as well as refusals
    expect(whole).toBeGreaterThan(100);
  });
});
