import { describe, expect, it } from "vitest";
import { guidedProblem } from "./guided-budget.js";
import { regexProblem } from "./regex-budget.js";
import { schemaProblem } from "./schema-budget.js";
import { xgrammarSchema } from "./xgrammar-schema.js";

const problem = (schema: unknown) => {
  const found = schemaProblem(schema);
  return found && `${found.pointer}: ${found.message}`;
};

describe("the schema check", () => {
  it("names a keyword it would otherwise ignore, with its JSON pointer", () => {
    expect(
      problem({ type: "object", properties: { "a/b": { type: "array", uniqueItems: true } } }),
    ).toBe("/properties/a~1b/uniqueItems: keyword 'uniqueItems' is not supported");
    expect(problem({ anyOf: [{ type: "string" }, { not: {} }] })).toBe(
      "/anyOf/1/not: keyword 'not' is not supported",
    );
    expect(problem({ maximum: 3 })).toBe(
      "/maximum: maximum needs a type beside it (without one any JSON value is written)",
    );
  });

  it("resolves references without expanding them: 30 doubling levels are 32 subschemas", () => {
    const defs: Record<string, unknown> = { d0: { type: "string" } };
    for (let i = 1; i <= 30; i++)
      defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    expect(problem({ $defs: defs, $ref: "#/$defs/d30" })).toBeUndefined();
    expect(problem({ $ref: "#/$defs/missing" })).toBe(
      "/$ref: $ref #/$defs/missing points at nothing in this schema",
    );
  });

  it("follows references for depth: a chain of definitions is as deep as the nesting it writes", () => {
    const chain = (levels: number, link: (ref: string) => unknown) => {
      const defs: Record<string, unknown> = { d0: { type: "string" } };
      for (let i = 1; i <= levels; i++) defs[`d${i}`] = link(`#/$defs/d${i - 1}`);
      return { $defs: defs, $ref: `#/$defs/d${levels}` };
    };
    const object = (ref: string) => ({
      type: "object",
      properties: { a: { $ref: ref } },
      required: ["a"],
    });
    const alias = (ref: string) => ({ $ref: ref });
    // each of these had passed and trapped XGrammar: 40 objects, 200 and 3,000 aliases (2,000
    // here, inside the subschema budget)
    expect(problem(chain(31, object))).toBeUndefined();
    expect(problem(chain(40, object))).toMatch(/nests deeper than 64 levels through its \$refs/);
    expect(problem(chain(63, alias))).toBeUndefined();
    for (const levels of [200, 2_000])
      expect(problem(chain(levels, alias))).toMatch(/through its \$refs/);
    // a list of types is an anyOf XGrammar recurses through: 28 of these had trapped it
    const nullable = (ref: string) => ({
      type: ["object", "null"],
      properties: { a: { $ref: ref } },
      required: ["a"],
    });
    expect(problem(chain(21, nullable))).toBeUndefined();
    expect(problem(chain(28, nullable))).toMatch(/through its \$refs/);
    let nested: unknown = { type: "string" };
    for (let i = 0; i < 17; i++) nested = { type: ["array", "null"], items: nested };
    expect(problem(nested)).toMatch(/nests deeper than 32 levels$/);
    // recursion (a reference back into its own path) is a rule XGrammar takes as it is
    const tree = {
      type: "object",
      properties: { value: { type: "integer" }, children: { type: "array", items: { $ref: "#" } } },
    };
    expect(problem(tree)).toBeUndefined();
  });

  it("holds the optional properties of objects that bound their count to 64, nested and tools together", () => {
    const object = (n: number, extra: Record<string, unknown> = {}) => ({
      type: "object",
      properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, {}])),
      ...extra,
    });
    // 200 optional properties and a minProperties: 6 KB that ran past the 5 s compile budget
    expect(problem(object(200, { minProperties: 2 }))).toMatch(
      /more than 64 optional properties in objects with minProperties or maxProperties/,
    );
    expect(problem(object(64, { minProperties: 2 }))).toBeUndefined();
    expect(problem(object(65, { maxProperties: 10 }))).toMatch(/more than 64 optional/);
    // counted across the schema's objects
    const two = {
      type: "object",
      properties: { a: object(40, { minProperties: 1 }), b: object(40, { minProperties: 1 }) },
    };
    expect(problem(two)).toMatch(/more than 64 optional/);
    // bounds its properties meet whatever is chosen cost nothing, nor do required properties
    const names = Array.from({ length: 200 }, (_, i) => `p${i}`);
    expect(problem(object(200, { minProperties: 0 }))).toBeUndefined();
    expect(problem(object(200, { minProperties: 5, required: names }))).toBeUndefined();
    expect(
      problem(object(200, { maxProperties: 200, additionalProperties: false })),
    ).toBeUndefined();
    expect(problem(object(200))).toBeUndefined();
  });

  it("holds subschemas, depth and counts to their budgets", () => {
    const wide = {
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 2_048 }, (_, i) => [`p${i}`, {}])),
    };
    expect(problem(wide)).toMatch(/more than 2048 subschemas/);
    // the object itself and 2,047 properties: at the budget
    const { p0: _dropped, ...fewer } = wide.properties;
    expect(problem({ ...wide, properties: fewer })).toBeUndefined();
    const nested = (levels: number) => {
      let deep: unknown = { type: "string" };
      for (let i = 0; i < levels; i++) deep = { type: "array", items: deep };
      return deep;
    };
    expect(problem(nested(32))).toBeUndefined();
    expect(problem(nested(33))).toMatch(/nests deeper than 32 levels/);
    // the deepest schema it takes, as JSON, is within the JSON budget
    let objects: unknown = { type: "string" };
    for (let i = 0; i < 32; i++) objects = { type: "object", properties: { a: objects } };
    expect(problem(objects)).toBeUndefined();
    // an enum's or const's value is data the budgets above do not walk: 5,000 levels in 30 KB
    // overflowed every JSON.stringify after them
    let value: unknown = 1;
    for (let i = 0; i < 5_000; i++) value = [value];
    expect(problem({ enum: [value] })).toMatch(/deeper than 128 levels of JSON/);
    expect(problem({ type: "object", properties: { a: { const: value } } })).toMatch(
      /deeper than 128 levels of JSON/,
    );
    expect(problem({ type: "string", maxLength: 10_001 })).toBe(
      "/maxLength: maxLength 10001 is more than 10000",
    );
  });

  it("takes every numeric bound, refusing only a range with no number in it", () => {
    expect(problem({ type: "integer", minimum: 0, maximum: 120 })).toBeUndefined();
    expect(
      problem({ type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    ).toBeUndefined();
    expect(problem({ type: "integer", minimum: -12 })).toBeUndefined();
    expect(problem({ type: "integer", minimum: -1000, maximum: 100_000 })).toBeUndefined();
    expect(problem({ type: "number", minimum: 0, maximum: 1 })).toBeUndefined();
    expect(problem({ type: ["number", "null"], exclusiveMinimum: 0 })).toBeUndefined();
    expect(problem({ type: "number", minimum: 5, exclusiveMinimum: true })).toBeUndefined();
    expect(problem({ type: "integer", minimum: 2.5, maximum: 2.9 })).toBe(
      "/minimum: no integer of at most 15 digits lies within these bounds",
    );
    expect(problem({ type: "number", minimum: 1e16 })).toMatch(/^\/minimum: no number/);
    const many = (n: number) => ({
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `p${i}`,
          { type: "number", minimum: i, maximum: 2 * i + 1 },
        ]),
      ),
    });
    expect(problem(many(64))).toBeUndefined();
    expect(problem(many(65))).toBe("/properties/p64: the schema bounds more than 64 numbers");
    const hard = (n: number) => ({
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `p${i}`,
          {
            type: "number",
            exclusiveMinimum: -0.123456789012345 - i,
            exclusiveMaximum: 987654321.987654 + i,
          },
        ]),
      ),
    });
    expect(problem(hard(12))).toBeUndefined();
    expect(problem(hard(20))).toMatch(/numeric bounds spell more than 1500 alternatives/);
    const patterned = {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 257 }, (_, i) => [`p${i}`, { type: "string", pattern: `a{${i}}` }]),
      ),
    };
    expect(problem(patterned)).toBe(
      "/properties/p256/pattern: the schema has more than 256 patterns",
    );
  });

  it("spells an integer multipleOf within bounds as its multiples, and refuses the rest by name", () => {
    expect(
      xgrammarSchema({ type: "integer", multipleOf: 5, minimum: 1, maximum: 20 }).schema,
    ).toEqual({
      enum: [5, 10, 15, 20],
    });
    expect(problem({ type: "integer", multipleOf: 5 })).toBe(
      "/multipleOf: multipleOf needs a minimum and a maximum (its multiples are spelled out)",
    );
    expect(problem({ type: "number", multipleOf: 0.5, minimum: 0, maximum: 1 })).toMatch(
      /^\/multipleOf: multipleOf is supported on integers/,
    );
    expect(problem({ type: "integer", multipleOf: 1, minimum: 0, maximum: 5000 })).toMatch(
      /5001 multiples, more than 1024/,
    );
  });

  it("writes a bounded number as a marker the grammar thread spells exactly, beside its other types", () => {
    const { schema, spellings } = xgrammarSchema({
      type: "object",
      properties: { p: { type: ["number", "null"], minimum: 0, maximum: 1 } },
    });
    const [name, ebnf] = [...spellings][0] ?? [];
    expect(schema).toEqual({
      type: "object",
      properties: { p: { anyOf: [{ const: name }, { type: "null" }] } },
    });
    expect(spellings.size).toBe(1);
    expect(ebnf?.("r")).toMatch(/^r ::= \[0\] r_\d+ \| \[1\] r_\d+\n/);
  });

  it("writes an unbounded integer as 15 digits at most (exact in a double), one rule for all of them", () => {
    const { schema, spellings } = xgrammarSchema({
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
    });
    const [name] = [...spellings.keys()];
    expect(schema).toEqual({
      type: "object",
      properties: { a: { const: name }, b: { const: name } },
    });
    expect(spellings.size).toBe(1);
  });

  it("gives an anyOf branch its parent's type, and a pattern beside a format wins", () => {
    expect(
      xgrammarSchema({ type: "string", anyOf: [{ maxLength: 2 }, { $ref: "#" }] }).schema,
    ).toEqual({
      type: "string",
      // the branch's length as the pattern of unescaped characters, as a typed node's
      anyOf: [{ type: "string", pattern: '^[^"\\\\\\x00-\\x1f]{0,2}$' }, { $ref: "#" }],
    });
    // the pattern, as a deterministic automaton of a JSON string's text
    const { schema, spellings } = xgrammarSchema({
      type: "string",
      format: "uuid",
      pattern: "^[0-9a-f-]{36}$",
    });
    const [name, rules] = [...spellings][0] ?? [];
    expect(schema).toEqual({ const: name });
    expect(rules?.("r").split("\n")[0]).toBe('r ::= "\\"" r_s "\\""');
  });
});

describe("the pattern check", () => {
  it("counts what counted repetitions write out", () => {
    expect(regexProblem("(?:(?:a?){49}){1000}")).toBeUndefined();
    expect(regexProblem("(?:(?:a{100}){100}){100}")).toMatch(/writes out to 1000000 characters/);
    expect(regexProblem("[a-z]{3}|(x{10}){20}")).toBeUndefined();
    expect(regexProblem("(?<=a)b")).toMatch(/lookaround/);
    expect(regexProblem("(a)\\1")).toMatch(/backreferences/);
    expect(regexProblem("x".repeat(4_097))).toMatch(/more than 4096/);
  });

  it("is applied to a schema's patterns too", () => {
    expect(
      guidedProblem({
        kind: "json_schema",
        schema: { type: "string", pattern: "(a{1000}){1000}" },
      }),
    ).toMatch(/^at \/pattern: pattern: the pattern writes out to 1000000 characters/);
  });
});
