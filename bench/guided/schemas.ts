import { readFileSync } from "node:fs";
import type { GuidedSpec } from "@ferry/guided";

const SUITE = "node_modules/json-schema-test-suite/tests/draft4";
/** The suite's files for the keywords OpenAI's structured outputs document. */
const FILES = [
  "type",
  "properties",
  "required",
  "additionalProperties",
  "enum",
  "anyOf",
  "ref",
  "definitions",
  "items",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
  "multipleOf",
  "pattern",
  "minLength",
  "maxLength",
  "optional/format",
];
/** Those keywords (draft 4's spelling), and the ones that only describe. */
const KEYWORDS = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "enum",
  "const",
  "anyOf",
  "$ref",
  "definitions",
  "$defs",
  "items",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "pattern",
  "format",
  "minLength",
  "maxLength",
  "description",
  "title",
  "default",
]);

/** Whether every keyword of `schema`, at every depth, is one of KEYWORDS. */
function onlyKnown(schema: unknown, inMap = false): boolean {
  if (Array.isArray(schema)) return schema.every((s) => onlyKnown(s));
  if (typeof schema !== "object" || schema === null) return true;
  return Object.entries(schema).every(
    ([key, value]) =>
      (inMap || KEYWORDS.has(key)) &&
      (key === "enum" || key === "const" || key === "required" || key === "default"
        ? true
        : onlyKnown(
            value,
            !inMap && (key === "properties" || key === "definitions" || key === "$defs"),
          )),
  );
}

/** Draft 4's boolean exclusive bounds as today's numbers, its `$schema`/`id` dropped. */
function modern(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(modern);
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  const node = schema as Record<string, unknown>;
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema" || key === "id") continue;
    if (key === "exclusiveMaximum" || key === "exclusiveMinimum") {
      const bound = node[key === "exclusiveMaximum" ? "maximum" : "minimum"];
      if (value === true && typeof bound === "number") out[key] = bound;
      continue;
    }
    out[key] = key === "enum" || key === "const" ? value : modern(value);
  }
  if (out.exclusiveMaximum !== undefined) delete out.maximum;
  if (out.exclusiveMinimum !== undefined) delete out.minimum;
  return out;
}

/** The types a keyword's schemas are given for their typed variants. */
const TYPES_OF: Record<string, string[]> = {
  minimum: ["number", "integer"],
  maximum: ["number", "integer"],
  multipleOf: ["number", "integer"],
  pattern: ["string"],
  minLength: ["string"],
  maxLength: ["string"],
  format: ["string"],
};

/** The suite's schemas within OpenAI's keywords (objects only: a boolean schema guides nothing). */
export function suiteSchemas(): Array<{ keyword: string; schema: Record<string, unknown> }> {
  const out: Array<{ keyword: string; schema: Record<string, unknown> }> = [];
  for (const file of FILES) {
    const groups = JSON.parse(readFileSync(`${SUITE}/${file}.json`, "utf8")) as Array<{
      schema: unknown;
    }>;
    for (const { schema } of groups)
      if (typeof schema === "object" && schema !== null && onlyKnown(schema)) {
        const keyword = file.replace("optional/", "");
        const modernised = modern(schema) as Record<string, unknown>;
        out.push({ keyword, schema: modernised });
        // the suite's own schemas carry no type (they pass every other value); clients' do
        if (!("type" in modernised))
          for (const type of TYPES_OF[keyword] ?? [])
            out.push({ keyword: `${keyword} (${type})`, schema: { type, ...modernised } });
      }
  }
  return out;
}

/** Schemas as clients write them; variant `k` renames a field, so that no compile is cached. */
export function realisticSchemas(): Array<{
  name: string;
  schema: (k: number) => Record<string, unknown>;
}> {
  return [
    {
      name: "Person (bounded integer, email, array)",
      schema: (k) => ({
        type: "object",
        properties: {
          name: { type: "string", maxLength: 40 },
          age: { type: "integer", minimum: 0, maximum: 120 },
          email: { type: "string", format: "email" },
          [`tags${k || ""}`]: { type: "array", items: { type: "string" }, maxItems: 5 },
        },
        required: ["name", "age", "email", `tags${k || ""}`],
        additionalProperties: false,
      }),
    },
    {
      name: "300 optional properties",
      schema: (k) => ({
        type: "object",
        properties: Object.fromEntries(
          Array.from({ length: 300 }, (_, i) => [`p${i}_${k}`, { type: "integer" }]),
        ),
      }),
    },
    {
      name: "nested arrays of objects, enums",
      schema: (k) => ({
        type: "object",
        properties: {
          [`orders${k}`]: {
            type: "array",
            items: {
              type: "object",
              properties: {
                id: { type: "string", pattern: "^[A-Z]{3}-[0-9]{4}$" },
                status: { enum: ["new", "paid", "shipped", "cancelled"] },
                lines: {
                  type: "array",
                  items: {
                    type: "object",
                    properties: { sku: { type: "string" }, qty: { type: "integer", minimum: 1 } },
                    required: ["sku", "qty"],
                  },
                },
              },
              required: ["id", "status", "lines"],
            },
          },
        },
        required: [`orders${k}`],
      }),
    },
    {
      name: "recursive tree (z.lazy)",
      schema: (k) => ({
        $defs: {
          node: {
            type: "object",
            properties: {
              [`v${k}`]: { type: "integer" },
              kids: { type: "array", items: { $ref: "#/$defs/node" } },
            },
            required: [`v${k}`, "kids"],
          },
        },
        $ref: "#/$defs/node",
      }),
    },
  ];
}

/** The containment issue's hostile specs. */
export function hostileSpecs(): Array<{ name: string; spec: GuidedSpec }> {
  const levels = (n: number) => {
    const defs: Record<string, unknown> = { d0: { type: "string" } };
    for (let i = 1; i <= n; i++)
      defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    return { $defs: defs, $ref: `#/$defs/d${n}` };
  };
  const optional = (n: number) => ({
    type: "object",
    properties: Object.fromEntries(
      Array.from({ length: n }, (_, i) => [`p${i}`, { type: "string" }]),
    ),
  });
  return [
    { name: "$ref 20 levels (1.4 KB)", spec: { kind: "json_schema", schema: levels(20) } },
    { name: "$ref 21 levels", spec: { kind: "json_schema", schema: levels(21) } },
    { name: "800 optional properties", spec: { kind: "json_schema", schema: optional(800) } },
    {
      name: "regex (?:(?:a?){49}){1000}",
      spec: { kind: "regex", pattern: "(?:(?:a?){49}){1000}" },
    },
    {
      name: "regex (?:(?:a{100}){100}){100}",
      spec: { kind: "regex", pattern: "(?:(?:a{100}){100}){100}" },
    },
  ];
}
