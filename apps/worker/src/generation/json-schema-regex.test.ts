import { describe, expect, it } from "vitest";
import { schemaToRegex } from "./json-schema-regex.js";
import { RegexGrammar } from "./regex-grammar.js";

function accepts(schema: unknown, value: unknown): boolean {
  const pattern = schemaToRegex(schema);
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const grammar = new RegexGrammar(pattern);
  const ours = [...Buffer.from(text)].every((b) => grammar.feed(b)) && grammar.complete;
  // the same regex read by JavaScript agrees
  expect(new RegExp(`^(?:${pattern})$`, "u").test(text), text).toBe(ours);
  return ours;
}

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer" },
    mood: { enum: ["happy", "sad", null] },
    tags: { type: "array", items: { type: "string" }, maxItems: 3 },
    score: { type: ["number", "null"] },
    home: { $ref: "#/$defs/place" },
  },
  required: ["name", "age"],
  additionalProperties: false,
  $defs: {
    place: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

describe("schemaToRegex", () => {
  it("accepts the instances of a schema, keys in the schema's order, optional ones left out", () => {
    for (const value of [
      { name: "Ada", age: 36 },
      { name: "", age: -1, mood: null, tags: [], score: 1.5e3 },
      { name: "Bo", age: 0, tags: ["a", 'q"b'], score: null, home: { city: "Oslo" } },
      '{"name": "x", "age": 7 , "mood":"sad"}',
    ])
      expect(accepts(person, value), JSON.stringify(value)).toBe(true);
  });

  it("refuses what the schema does not allow", () => {
    for (const value of [
      { age: 36 },
      { name: "Ada", age: 3.5 },
      { name: "Ada", age: 3, mood: "angry" },
      { name: "Ada", age: 3, tags: ["a", "b", "c", "d"] },
      { name: "Ada", age: 3, extra: true },
      { age: 3, name: "Ada" },
      { name: "a name far too long", age: 3 },
      { name: "Ada", age: 3, home: {} },
    ])
      expect(accepts(person, value), JSON.stringify(value)).toBe(false);
  });

  it("arrays with minItems, anyOf, const, booleans, and an object of optional members only", () => {
    const schema = {
      type: "object",
      properties: {
        ok: { type: "boolean" },
        pair: {
          type: "array",
          items: { anyOf: [{ type: "integer" }, { const: "x" }] },
          minItems: 2,
          maxItems: 2,
        },
      },
    };
    expect(accepts(schema, {})).toBe(true);
    expect(accepts(schema, { pair: [1, "x"] })).toBe(true);
    expect(accepts(schema, { ok: false, pair: ["x", 2] })).toBe(true);
    expect(accepts(schema, { pair: [1] })).toBe(false);
    expect(accepts(schema, { pair: [1, "y"] })).toBe(false);
  });

  it("integers as zod writes them (safe-integer bounds), and a minimum of 0", () => {
    const count = (extra: object) => ({
      type: "object",
      properties: { n: { type: "integer", ...extra } },
      required: ["n"],
    });
    const safe = count({ minimum: -9007199254740991, maximum: 9007199254740991 });
    expect(accepts(safe, { n: -12 })).toBe(true);
    expect(accepts(count({ minimum: 0 }), { n: 0 })).toBe(true);
    expect(accepts(count({ minimum: 0 }), { n: -1 })).toBe(false);
    expect(() => schemaToRegex(count({ maximum: 10 }))).toThrow(/maximum/);
  });

  it("refuses by name what it would otherwise ignore", () => {
    const string = (extra: object) => ({
      type: "object",
      properties: { s: { type: "string", ...extra } },
    });
    expect(() => schemaToRegex(string({ pattern: "a+" }))).toThrow(
      "the schema keyword pattern is not supported",
    );
    expect(() => schemaToRegex(string({ format: "date" }))).toThrow(
      "the schema keyword format is not supported",
    );
    expect(() => schemaToRegex({ type: "object", properties: { x: {} } })).toThrow(
      /without a type/,
    );
    expect(() =>
      schemaToRegex({
        $defs: { n: { type: "object", properties: { next: { $ref: "#/$defs/n" } } } },
        $ref: "#/$defs/n",
      }),
    ).toThrow(/recursive/);
    expect(() => schemaToRegex({ type: "object", additionalProperties: true })).toThrow(
      /additionalProperties/,
    );
  });
});
