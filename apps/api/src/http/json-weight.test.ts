import { describe, expect, it } from "vitest";
import { containersUpTo, jsonWeight, tooHeavy, WEIGHT } from "./json-weight.js";

const bytes = (text: string) => new TextEncoder().encode(text);

/** The weight by one plain walk of every character: what `jsonWeight` must agree with. */
function walked(text: string): number {
  let weight = text.length;
  let inString = false;
  for (let k = 0; k < text.length; k++) {
    const c = text[k];
    if (inString) {
      if (c === "\\") k++;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      weight += WEIGHT.string;
    } else if (c === "{" || c === "[") weight += WEIGHT.container;
    else if (c === ",") weight += WEIGHT.comma;
    else if (c === ":") weight += WEIGHT.colon;
  }
  return weight;
}

/** A random JSON value whose strings are full of what a weighing could mistake for structure. */
function randomValue(depth: number, random: () => number): unknown {
  const pick = random();
  if (depth > 3 || pick < 0.3) {
    const pieces = ["a", "{", "[", ",", ":", '"', "\\", '\\"', "é", "\u0000", "}", "]", " "];
    return Array.from(
      { length: Math.floor(random() * 8) },
      () => pieces[Math.floor(random() * pieces.length)],
    ).join("");
  }
  if (pick < 0.4) return random() * 1000;
  if (pick < 0.7)
    return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(depth + 1, random));
  return Object.fromEntries(
    Array.from({ length: Math.floor(random() * 4) }, (_, k) => [
      `${randomValue(9, random)}${k}`,
      randomValue(depth + 1, random),
    ]),
  );
}

describe("jsonWeight", () => {
  it("weighs a body by its bytes and what JSON.parse makes of it, strings told apart", () => {
    const numbers = JSON.stringify({
      inputs: [
        [1.5, 2, 3],
        [4, 5, 6],
      ],
    });
    expect(jsonWeight(numbers, 1_000_000)).toBe(
      numbers.length + 4 * WEIGHT.container + 5 * WEIGHT.comma + WEIGHT.colon + WEIGHT.string,
    );
    expect(jsonWeight("7", 1)).toBe(1);
    expect(jsonWeight("", 0)).toBe(0);
    // braces, commas, colons and escaped quotes inside strings are text
    const prose = JSON.stringify({ prompt: 'f(a) { return {x: [a, "b"]}; }\\' });
    expect(jsonWeight(prose, 1_000_000)).toBe(
      prose.length + WEIGHT.container + WEIGHT.colon + 2 * WEIGHT.string,
    );
    // bytes and text agree
    expect(jsonWeight(bytes(prose), 1_000_000)).toBe(jsonWeight(prose, 1_000_000));
  });

  it("agrees with a walk of every character on random bodies, bytes or text", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let k = 0; k < 500; k++) {
      const text = JSON.stringify(randomValue(0, random));
      expect(jsonWeight(text, Number.POSITIVE_INFINITY), text).toBe(walked(text));
      const utf8 = bytes(text);
      expect(jsonWeight(utf8, Number.POSITIVE_INFINITY), text).toBe(
        walked(text) + utf8.byteLength - text.length,
      );
    }
    // not JSON: an unterminated string is weighed to its end
    expect(jsonWeight('{"a":"b,c', 1_000)).toBe(walked('{"a":"b,c'));
  });

  it("refuses a body whose parse would cost more than the largest plain body's", () => {
    // 8 MB of `{}` in a field no schema reads had held the loop ~1.6 s; a million distinct
    // keys ~1.5 s
    const junk = `{"inputs":[1],"junk":[${"{},".repeat(200_000)}{}]}`;
    expect(jsonWeight(junk, 8 * 1024 * 1024)).toBeUndefined();
    expect(jsonWeight(junk, walked(junk))).toBe(walked(junk));
    expect(jsonWeight(junk, walked(junk) - 1)).toBeUndefined();
    const keys = `{${Array.from({ length: 100_000 }, (_, k) => `"k${k}":0`).join(",")}}`;
    expect(jsonWeight(keys, 8 * 1024 * 1024)).toBeUndefined();
    // a body past the limit in bytes alone
    expect(jsonWeight("[1]", 2)).toBeUndefined();
    // a 7 MB prompt weighs its bytes
    const prompt = JSON.stringify({ prompt: "p, {q}: ".repeat(875_000) });
    expect(jsonWeight(prompt, 8 * 1024 * 1024)).toBe(
      prompt.length + WEIGHT.container + WEIGHT.colon + 2 * WEIGHT.string,
    );
  });

  it("says what a body may hold in the refusal", () => {
    expect(tooHeavy(480).message).toMatch(/largest body \(480 bytes\)/);
    expect(tooHeavy(480).code).toBe("PAYLOAD_TOO_LARGE");
  });
});

describe("containersUpTo", () => {
  it("counts objects and lists outside strings, and stops once past what it needs", () => {
    expect(containersUpTo(bytes('{"p":"\\"[[[[","q":[]}'))).toBe(2);
    expect(containersUpTo(bytes("[[[[[[[[[["), 3)).toBe(3);
    expect(containersUpTo(bytes("[[[[[[[[[[]]]]]]]]]]"))).toBe(10);
  });
});
