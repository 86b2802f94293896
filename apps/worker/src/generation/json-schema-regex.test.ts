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

/** Whether a string schema accepts the JSON string of `content`. */
function acceptsString(schema: unknown, content: string): boolean {
  return accepts(schema, JSON.stringify(content));
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

  it("a string's pattern: whole where anchored, anywhere where not, and never a character JSON would escape", () => {
    const code = { type: "string", pattern: "^[A-Z]{3}-\\d{2}$" };
    expect(acceptsString(code, "ABC-12")).toBe(true);
    for (const bad of ["ABC-1", "xABC-12", "ABC-12x", "abc-12"])
      expect(acceptsString(code, bad)).toBe(false);
    // unanchored: the pattern anywhere in the string (JSON Schema's rule, as RegExp.test)
    const digits = { type: "string", pattern: "\\d{3}" };
    expect(acceptsString(digits, "ab123cd")).toBe(true);
    expect(acceptsString(digits, "123")).toBe(true);
    expect(acceptsString(digits, "ab12c3")).toBe(false);
    // characters a JSON string must escape are taken out of the pattern's classes
    const quoteless = { type: "string", pattern: '^[a"\\\\]+$' };
    expect(acceptsString(quoteless, "aaa")).toBe(true);
    expect(acceptsString(quoteless, 'a"a')).toBe(false);
    expect(acceptsString(quoteless, "a\\a")).toBe(false);
    // zod's own patterns (z.email(), z.uuid(), z.iso.date()), which come with a format
    const zodSchemas = {
      email:
        "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
      uuid: "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
    };
    expect(
      acceptsString({ type: "string", format: "email", pattern: zodSchemas.email }, "a.b@c.io"),
    ).toBe(true);
    expect(
      acceptsString({ type: "string", format: "email", pattern: zodSchemas.email }, "a@b"),
    ).toBe(false);
    const uuid = { type: "string", format: "uuid", pattern: zodSchemas.uuid };
    expect(acceptsString(uuid, "123e4567-e89b-12d3-a456-426614174000")).toBe(true);
    expect(acceptsString(uuid, "123e4567-e89b-92d3-a456-426614174000")).toBe(false);
  });

  it("a string's format: what each accepts is of the format", () => {
    const cases: Record<string, [string[], string[]]> = {
      date: [
        ["2024-02-29", "2023-12-31", "2000-02-29"],
        ["2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "23-01-01"],
      ],
      time: [
        ["23:59:59Z", "00:00:00.123+05:30"],
        ["24:00:00Z", "12:00:00", "12:60:00Z"],
      ],
      "date-time": [["2024-02-29T12:00:00Z"], ["2024-02-29 12:00:00Z", "2024-02-30T12:00:00Z"]],
      uuid: [["123E4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]],
      email: [
        ["ada@example.com", "a.b+c@mail.example.org"],
        [".a@example.com", "a..b@example.com", "a@example", "a@-x.com"],
      ],
      hostname: [
        ["example", "a-b.example.com"],
        ["-a.com", "a_b.com", "a..b"],
      ],
      ipv4: [
        ["192.168.0.1", "0.0.0.0"],
        ["256.1.1.1", "1.2.3", "01.2.3.4"],
      ],
    };
    for (const [format, [good, bad]] of Object.entries(cases)) {
      const schema = { type: "string", format };
      for (const text of good) expect(acceptsString(schema, text), `${format}: ${text}`).toBe(true);
      for (const text of bad) expect(acceptsString(schema, text), `${format}: ${text}`).toBe(false);
    }
  });

  it("refuses by name what it would otherwise ignore", () => {
    const string = (extra: object) => ({
      type: "object",
      properties: { s: { type: "string", ...extra } },
    });
    expect(() => schemaToRegex(string({ pattern: "a+", maxLength: 3 }))).toThrow(
      "minLength or maxLength beside pattern is not supported",
    );
    expect(() => schemaToRegex(string({ format: "uri" }))).toThrow(
      /^format "uri" is not supported/,
    );
    expect(() => schemaToRegex(string({ pattern: "^a(?=b)$" }))).toThrow(/lookaround/);
    // a pattern every match of which needs an escape in JSON
    expect(() => schemaToRegex(string({ pattern: '^a"b$' }))).toThrow(/characters JSON escapes/);
    expect(() => schemaToRegex({ type: "integer", pattern: "1" })).toThrow(
      "the schema keyword pattern is not supported",
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
