import { escapeRegex, RegexError } from "./regex-grammar.js";

/**
 * A JSON schema as a regular expression over the JSON texts it accepts (Outlines' method, as
 * vLLM's `guided_json` and OpenAI's `json_schema` response format use it), for the regex guide.
 *
 * Supported: `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`, `null`, or a
 * list of them), `properties` (written in the schema's order; those not in `required` may be
 * left out; no others), `items` with `minItems`/`maxItems`, `minLength`/`maxLength`, an
 * integer's `minimum` of 0 or 1 (and bounds past 15 digits, as zod writes), `enum`,
 * `const`, `anyOf`/`oneOf`, and `$ref` into `$defs`/`definitions` (not recursive). Anything
 * else that would constrain the answer (`pattern`, `format`, `allOf`, `not`, bounds on numbers,
 * `additionalProperties` other than false, ...) is refused by name rather than ignored.
 */

/** Between tokens of the JSON text: one space at most, so that a model cannot pad forever. */
const WS = "[ ]?";
const STRING_CHAR = '(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})';
/** Up to 15 digits: every such integer is safe in JavaScript and in a double. */
const DIGITS = "[1-9][0-9]{0,14}";
const INTEGER = `-?(?:0|${DIGITS})`;
/** What no integer of 15 digits reaches: a bound past it (zod's safe-integer ones) binds nothing. */
const FAR = 1e15;
const NUMBER = `${INTEGER}(?:\\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,3})?`;

/** Keywords that only describe (names, examples): they change no answer. */
const DESCRIPTIVE = new Set([
  "title",
  "description",
  "examples",
  "default",
  "$schema",
  "$id",
  "$comment",
  "$defs",
  "definitions",
  "deprecated",
  "readOnly",
  "writeOnly",
  "strict",
]);

/** The keywords this converter applies. */
const KEYWORDS = new Set([
  "type",
  "properties",
  "required",
  "items",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "$ref",
]);
/** An integer's bounds too (see `integer`). */
const INTEGER_KEYWORDS = new Set([...KEYWORDS, "minimum", "maximum"]);

type Schema = Record<string, unknown>;

export function schemaToRegex(schema: unknown): string {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema))
    throw new RegexError("a JSON schema must be an object");
  const root = schema as Schema;
  const defs = {
    ...(root.definitions as Schema | undefined),
    ...(root.$defs as Schema | undefined),
  };
  return new Converter(defs).value(root, []);
}

class Converter {
  constructor(private readonly defs: Schema) {}

  value(schema: Schema, refs: string[]): string {
    const ref = schema.$ref;
    if (typeof ref === "string") return this.ref(ref, refs);
    this.refuseUnknown(schema);
    if (schema.const !== undefined) return literal(schema.const);
    if (Array.isArray(schema.enum)) return `(?:${schema.enum.map(literal).join("|")})`;
    const options = (schema.anyOf ?? schema.oneOf) as unknown;
    if (Array.isArray(options))
      return `(?:${options.map((o) => this.value(asSchema(o), refs)).join("|")})`;
    const type = schema.type;
    if (Array.isArray(type))
      return `(?:${type.map((t) => this.value({ ...schema, type: t }, refs)).join("|")})`;
    switch (type) {
      case "object":
        return this.object(schema, refs);
      case "array":
        return this.array(schema, refs);
      case "string":
        return this.string(schema);
      case "integer":
        return this.integer(schema);
      case "number":
        return NUMBER;
      case "boolean":
        return "(?:true|false)";
      case "null":
        return "null";
      default:
        throw new RegexError(
          type === undefined
            ? "a schema without a type (any JSON value) is not supported"
            : `type ${JSON.stringify(type)} is not supported`,
        );
    }
  }

  private ref(ref: string, refs: string[]): string {
    const name = /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(ref)?.[1];
    const target = name === undefined ? undefined : this.defs[name];
    if (target === undefined)
      throw new RegexError(`$ref ${ref} is not supported (only #/$defs/...)`);
    if (refs.includes(ref)) throw new RegexError(`$ref ${ref} is recursive: not supported`);
    return this.value(asSchema(target), [...refs, ref]);
  }

  private object(schema: Schema, refs: string[]): string {
    const properties = Object.entries((schema.properties ?? {}) as Schema);
    const required = new Set((schema.required ?? []) as string[]);
    for (const name of required)
      if (!properties.some(([key]) => key === name))
        throw new RegexError(`required property ${name} has no schema`);
    const members = properties.map(
      ([key, sub]) => `${literal(key)}${WS}:${WS}${this.value(asSchema(sub), refs)}`,
    );
    // the members in the schema's order, those not required optional: one alternative per
    // member that may come first (every one before it left out)
    const lists: string[] = [];
    for (let first = 0; first < members.length; first++) {
      let list = members[first] as string;
      for (let k = first + 1; k < members.length; k++) {
        const member = `${WS},${WS}${members[k]}`;
        list += required.has(properties[k]?.[0] ?? "") ? member : `(?:${member})?`;
      }
      lists.push(list);
      if (required.has(properties[first]?.[0] ?? "")) break;
    }
    const allOptional = properties.every(([key]) => !required.has(key));
    const body = lists.length === 0 ? "" : `(?:${lists.join("|")})${allOptional ? "?" : ""}`;
    return `\\{${WS}${body}${WS}\\}`;
  }

  private array(schema: Schema, refs: string[]): string {
    const item = this.value(asSchema(schema.items ?? {}), refs);
    const [min, max] = bounds(schema.minItems, schema.maxItems, "minItems and maxItems");
    if (max === 0) return `\\[${WS}\\]`;
    // without maxItems a loop, not copies: an automaton's size grows with a bound
    const rest = `(?:${WS},${WS}${item}){${Math.max(0, min - 1)},${max === undefined ? "" : max - 1}}`;
    const items = `${item}${rest}`;
    return `\\[${WS}${min === 0 ? `(?:${items})?` : items}${WS}\\]`;
  }

  /** An integer, at least 0 or 1 where `minimum` says so; other bounds are refused. */
  private integer(schema: Schema): string {
    const min = schema.minimum === undefined ? -FAR : Number(schema.minimum);
    const max = schema.maximum === undefined ? FAR : Number(schema.maximum);
    if (max < FAR) throw new RegexError("maximum is not supported (but past 15 digits)");
    if (min <= -FAR) return INTEGER;
    if (min === 0) return `(?:0|${DIGITS})`;
    if (min === 1) return DIGITS;
    throw new RegexError("minimum is supported as 0 or 1 (or past 15 digits)");
  }

  private string(schema: Schema): string {
    const [min, max] = bounds(schema.minLength, schema.maxLength, "minLength and maxLength");
    return `"${STRING_CHAR}{${min},${max ?? ""}}"`;
  }

  /** Keywords that would constrain the answer and that this converter does not apply. */
  private refuseUnknown(schema: Schema): void {
    const known = schema.type === "integer" ? INTEGER_KEYWORDS : KEYWORDS;
    for (const [key, v] of Object.entries(schema)) {
      if (known.has(key) || DESCRIPTIVE.has(key)) continue;
      // what OpenAI's strict mode requires anyway: nothing beyond the declared properties
      if (key === "additionalProperties" && v === false) continue;
      throw new RegexError(`the schema keyword ${key} is not supported`);
    }
  }
}

/** A minimum (0 when absent) and a maximum (undefined when absent), whole and in order. */
function bounds(min: unknown, max: unknown, names: string): [number, number | undefined] {
  const lo = min === undefined ? 0 : Number(min);
  const hi = max === undefined ? undefined : Number(max);
  if (!Number.isInteger(lo) || lo < 0 || (hi !== undefined && (!Number.isInteger(hi) || hi < lo)))
    throw new RegexError(`${names} must be whole numbers, the minimum at most the maximum`);
  return [lo, hi];
}

function asSchema(value: unknown): Schema {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new RegexError("a subschema must be an object");
  return value as Schema;
}

/** A JSON value's text, as a regex that matches exactly it. */
function literal(value: unknown): string {
  return escapeRegex(JSON.stringify(value));
}
