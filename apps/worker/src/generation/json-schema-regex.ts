import { escapeRegex, jsonSafePattern, RegexError } from "./regex-grammar.js";

/**
 * A JSON schema as a regular expression over the JSON texts it accepts (Outlines' method, as
 * vLLM's `guided_json` and OpenAI's `json_schema` response format use it), for the regex guide.
 *
 * Supported: `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`, `null`, or a
 * list of them), `properties` (written in the schema's order; those not in `required` may be
 * left out; no others), `items` with `minItems`/`maxItems`, a string's `minLength`/`maxLength`,
 * `pattern` (ECMA-262, matched anywhere unless anchored, as JSON Schema says) or `format` (a set
 * of common ones, each as a regular expression that accepts a part of what the format allows;
 * beside a `pattern` a format is an annotation, as JSON Schema 2020-12 has it), an integer's
 * `minimum` of 0 or 1 (and bounds past 15 digits, as zod writes), `enum`, `const`,
 * `anyOf`/`oneOf`, and `$ref` into `$defs`/`definitions` (not recursive). Anything else that
 * would constrain the answer (`allOf`, `not`, bounds on numbers, a length beside a pattern,
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
/** The keywords a type takes beyond the common ones: an integer's bounds, a string's pattern and format. */
const KEYWORDS_OF: Record<string, Set<string>> = {
  integer: INTEGER_KEYWORDS,
  string: new Set([...KEYWORDS, "pattern", "format"]),
};

/** A character a JSON string holds unescaped (what a pattern's unanchored ends may add). */
const SAFE_CHAR = '[^"\\\\\\x00-\\x1f]';
/** A calendar date: each month's days, the 29th of February in leap years (zod's rule). */
const DATE =
  "(?:(?:[0-9]{2}(?:[2468][048]|[13579][26]|0[48])|(?:[02468][048]|[13579][26])00)-02-29|[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8])))";
const TIME =
  "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
/**
 * Formats a string may have, each as what a JSON string of it may be (RFC 3339's dates and
 * times, RFC 4122's UUIDs, dot-atom addresses of RFC 5321, RFC 1123's host names within their
 * length, dotted IPv4): every text accepted is of the format, not every one of the format is.
 */
const FORMATS: Record<string, string> = {
  date: DATE,
  time: TIME,
  "date-time": `${DATE}T${TIME}`,
  uuid: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
  email: `[A-Za-z0-9_%+-]{1,20}(?:\\.[A-Za-z0-9_%+-]{1,20}){0,2}@${LABEL}(?:\\.${LABEL}){0,2}\\.[A-Za-z]{2,24}`,
  hostname: `${LABEL}(?:\\.${LABEL}){0,2}`,
  ipv4: `${OCTET}(?:\\.${OCTET}){3}`,
};

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
    const { pattern, format } = schema;
    if (pattern === undefined && format === undefined) {
      const [min, max] = bounds(schema.minLength, schema.maxLength, "minLength and maxLength");
      return `"${STRING_CHAR}{${min},${max ?? ""}}"`;
    }
    // one regular expression cannot say both a length and a pattern
    if (schema.minLength !== undefined || schema.maxLength !== undefined)
      throw new RegexError(
        `minLength or maxLength beside ${pattern === undefined ? "format" : "pattern"} is not supported`,
      );
    if (typeof pattern === "string") return `"${patternContent(pattern)}"`;
    if (pattern !== undefined) throw new RegexError("pattern must be a string");
    const known = typeof format === "string" ? FORMATS[format] : undefined;
    if (known === undefined)
      throw new RegexError(
        `format ${JSON.stringify(format)} is not supported (${Object.keys(FORMATS).join(", ")} are)`,
      );
    return `"${known}"`;
  }

  /** Keywords that would constrain the answer and that this converter does not apply. */
  private refuseUnknown(schema: Schema): void {
    const known = KEYWORDS_OF[String(schema.type)] ?? KEYWORDS;
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

/**
 * What a JSON string whose content matches `pattern` may hold, unescaped: the pattern where
 * it is anchored (`^...$`), any characters before or after it where it is not (JSON Schema's
 * patterns match anywhere in the string).
 */
function patternContent(pattern: string): string {
  const start = pattern.startsWith("^");
  const end = /(?:^|[^\\])(?:\\\\)*\$$/.test(pattern);
  return `${start ? "" : `${SAFE_CHAR}*`}(?:${jsonSafePattern(pattern)})${end ? "" : `${SAFE_CHAR}*`}`;
}

/** A JSON value's text, as a regex that matches exactly it. */
function literal(value: unknown): string {
  return escapeRegex(JSON.stringify(value));
}
