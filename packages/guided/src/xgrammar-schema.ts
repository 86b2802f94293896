import { randomBytes } from "node:crypto";
import { formatSpelling } from "./format-spelling.js";
import { BOUND_KEYWORDS, type BoundsPlan, boundsPlan } from "./number-bounds.js";
import { numberRange } from "./number-range.js";
import { regexEbnf } from "./regex-automaton.js";
import { DESCRIPTIVE } from "./schema-budget.js";
import { type Atom, type Sequence, type Spelling, sequenceEbnf } from "./spelling.js";

/** An integer with no bounds: 15 digits at most, every one exact in a double. */
const FIFTEEN_DIGITS: BoundsPlan = {
  kind: "range",
  spelling: numberRange(undefined, undefined, true),
};

/** A schema as XGrammar should compile it, and the exact spellings its markers stand for. */
export interface XGrammarSchema {
  schema: unknown;
  /** Each marker (a `const` string in `schema`) and the EBNF rules it stands for, by rule name. */
  spellings: Map<string, Rules>;
}

/** EBNF rules whose first, and start, is named `rule`. */
export type Rules = (rule: string) => string;

/**
 * A schema as XGrammar should compile it (the API's check has accepted it). Where a string has
 * both `pattern` and `format`, XGrammar spells the format alone, and zod writes both (`z.uuid()`:
 * a version-checking pattern beside `format: "uuid"`): the pattern is kept, the stricter as zod
 * writes them (JSON Schema 2020-12 makes a format an annotation by default anyway). An `anyOf`
 * branch with no type of its own is given its parent's (XGrammar reads a branch alone). A
 * bounded number, an enum of plain values and a date, time or hostname format becomes a
 * marker: a `const` string that `spellingRules` replaces in XGrammar's EBNF by an exact, deterministic spelling (spelling.ts);
 * an integer with no bounds is held to 15 digits.
 */
export function xgrammarSchema(schema: unknown): XGrammarSchema {
  const spellings = new Map<string, Rules>();
  const nonce = randomBytes(6).toString("hex");
  const names = new Map<string, string>();
  // one marker per distinct spelling: 300 unbounded integers share one rule
  const marked = (key: string, rules: Rules): string => {
    let name = names.get(key);
    if (name === undefined) {
      name = `ferry-spelling-${nonce}-${spellings.size}`;
      names.set(key, name);
      spellings.set(name, rules);
    }
    return name;
  };
  const marker = (spelling: Sequence): string =>
    marked(JSON.stringify(spelling), (rule) => sequenceEbnf(spelling, rule));
  let enumCharacters = 0;
  let automata = 0;
  const rewrite = (node: unknown, inheritedType?: unknown): unknown => {
    if (Array.isArray(node)) return node.map((s) => rewrite(s));
    if (typeof node !== "object" || node === null) return node;
    const own = split(node as Record<string, unknown>);
    const type = own.type ?? inheritedType;
    const out: Record<string, unknown> = {};
    if (inheritedType !== undefined && !("type" in own) && !("$ref" in own))
      out.type = inheritedType;
    const shadowed = typeof own.pattern === "string" && typeof own.format === "string";
    for (const [key, value] of Object.entries(own)) {
      if (shadowed && key === "format") continue;
      if (key === "enum" || key === "const")
        out[key] = value; // values, not schemas
      else if ((key === "anyOf" || key === "oneOf") && Array.isArray(value))
        out[key] = value.map((branch) => rewrite(branch, type));
      else if (SCHEMA_MAPS.has(key) && isObject(value))
        // a map of names to schemas: a property may be called "enum"
        out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)]));
      else out[key] = rewrite(value);
    }
    const length = lengthPattern(own, type);
    if (length) {
      delete out.minLength;
      delete out.maxLength;
      out.pattern = length;
    }
    // a node becomes a marker only where the spelling is all it asks (keywords beside it, an
    // anyOf, a length, would be lost): else XGrammar's own
    const only = (...keys: string[]) =>
      Object.keys(own).every((k) => k === "type" || DESCRIPTIVE.has(k) || keys.includes(k));
    // the caller's pattern as a deterministic automaton, where it can be built (a length's
    // pattern, which XGrammar writes exactly, stays XGrammar's)
    if (
      type === "string" &&
      typeof own.pattern === "string" &&
      only("pattern", "format", "minLength", "maxLength") &&
      automata < PATTERN_AUTOMATA
    ) {
      const pattern = own.pattern;
      const length =
        own.minLength === undefined && own.maxLength === undefined
          ? undefined
          : {
              min: typeof own.minLength === "number" ? own.minLength : 0,
              ...(typeof own.maxLength === "number" ? { max: own.maxLength } : {}),
            };
      automata++;
      if (regexEbnf(pattern, "r", "json-string", length))
        return {
          const: marked(
            `pattern ${JSON.stringify(length)} ${pattern}`,
            (rule) => regexEbnf(pattern, rule, "json-string", length) ?? "",
          ),
        };
    }
    const format = type === "string" && only("format") && formatSpelling(own.format);
    if (format) return { const: marker(format) };
    const kept = enumKept(own);
    const values = kept && enumSpelling(kept, ENUMS_SPELLED - enumCharacters);
    if (values) {
      enumCharacters += values.reduce((n, [atom]) => n + spelledLength(atom), 0);
      return { const: marker([values]) };
    }
    const numeric = type === "integer" || type === "number";
    if (!numeric || !only(...BOUND_KEYWORDS)) return out;
    const plan = boundsPlan(own, type) ?? (type === "integer" ? FIFTEEN_DIGITS : undefined);
    if (plan === undefined || plan.kind === "refuse") return out;
    return plan.kind === "spell" ? { enum: plan.values } : { const: marker([plan.spelling]) };
  };
  return { schema: rewrite(schema), spellings };
}

/**
 * XGrammar's EBNF for a schema with markers, each marker's literal (`"\"name\""`) replaced by a
 * rule that spells it; throws where a marker is left (XGrammar merged it into a longer
 * literal), rather than let a model write the marker itself.
 */
export function spellingRules(ebnf: string, spellings: ReadonlyMap<string, Rules>): string {
  const rules: string[] = [];
  const named = new Map<string, string>();
  // one pass over the text, however many markers (a replace per marker was quadratic)
  const out = ebnf.replace(/"\\"(ferry-spelling-[0-9a-f]+-\d+)\\""/g, (literal, name: string) => {
    const rulesOf = spellings.get(name);
    if (!rulesOf) return literal;
    let rule = named.get(name);
    if (rule === undefined) {
      rule = `ferry_spelling_${named.size}`;
      named.set(name, rule);
      rules.push(rulesOf(rule));
    }
    return rule;
  });
  // a marker left (merged by XGrammar into a longer literal) would be written as it is
  for (const [name] of out.matchAll(/ferry-spelling-[0-9a-f]+-\d+/g))
    if (spellings.has(name))
      throw new Error("a spelling's marker could not be placed in XGrammar's grammar");
  return `${out}\n${rules.join("\n")}\n`;
}

/**
 * Most patterns of one schema built as automata (each has its own budget of work; past these,
 * XGrammar's own), so that one schema's patterns cost the grammar thread a bounded time.
 */
const PATTERN_AUTOMATA = 32;
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAPS = new Set(["properties", "$defs", "definitions", "patternProperties"]);
/** The keywords that apply to each type, for a type list split into one branch per type. */
const TYPE_KEYWORDS: Record<string, string[]> = {
  string: ["minLength", "maxLength", "pattern", "format"],
  number: BOUND_KEYWORDS,
  integer: BOUND_KEYWORDS,
  object: ["properties", "required", "additionalProperties", "minProperties", "maxProperties"],
  array: ["items", "minItems", "maxItems"],
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A node whose `type` is a list, as an anyOf of one branch per type with the keywords that
 * apply to it (`["string", "null"]` with a maxLength: the string's rewrites apply to its
 * branch); other nodes as they are. A node with its own anyOf, enum or const stays whole.
 */
function split(node: Record<string, unknown>): Record<string, unknown> {
  const types = node.type;
  if (!Array.isArray(types) || types.length < 2) return node;
  if (["anyOf", "oneOf", "enum", "const", "$ref"].some((k) => k in node)) return node;
  const typed = new Set(Object.values(TYPE_KEYWORDS).flat());
  const shared = Object.fromEntries(
    Object.entries(node).filter(([k]) => k !== "type" && !typed.has(k)),
  );
  // number and integer together are a number
  const kinds = types.includes("number") ? types.filter((t) => t !== "integer") : types;
  return {
    ...shared,
    anyOf: kinds.map((t) => ({
      type: t,
      ...Object.fromEntries(
        Object.entries(node).filter(([k]) => (TYPE_KEYWORDS[String(t)] ?? []).includes(k)),
      ),
    })),
  };
}

/** Keywords an enum's values can be checked against here. */
const CHECKED = new Set(["type", "enum", ...BOUND_KEYWORDS, "minLength", "maxLength", "pattern"]);

/**
 * An enum's values that the keywords beside it allow (a bound, a length, a pattern, the type),
 * or undefined where there is no enum or a keyword beside it cannot be checked here (an anyOf,
 * a format): that node is left to XGrammar.
 */
function enumKept(node: Record<string, unknown>): unknown[] | undefined {
  if (!Array.isArray(node.enum)) return undefined;
  if (!Object.keys(node).every((k) => CHECKED.has(k) || DESCRIPTIVE.has(k))) return undefined;
  const types = node.type === undefined ? undefined : [node.type].flat();
  const typeOf = (v: unknown) =>
    v === null
      ? "null"
      : typeof v === "number"
        ? Number.isInteger(v)
          ? "integer"
          : "number"
        : typeof v;
  const num = (k: string) => (typeof node[k] === "number" ? (node[k] as number) : undefined);
  const draft4 = (k: string) => node[k] === true;
  let pattern: RegExp | undefined;
  try {
    pattern = typeof node.pattern === "string" ? new RegExp(node.pattern, "u") : undefined;
  } catch {
    return undefined;
  }
  return node.enum.filter((v) => {
    const t = typeOf(v);
    if (types && !types.some((x) => x === t || (x === "number" && t === "integer"))) return false;
    if (typeof v === "number") {
      const [min, max] = [num("minimum"), num("maximum")];
      const [xmin, xmax] = [num("exclusiveMinimum"), num("exclusiveMaximum")];
      if (min !== undefined && (draft4("exclusiveMinimum") ? v <= min : v < min)) return false;
      if (max !== undefined && (draft4("exclusiveMaximum") ? v >= max : v > max)) return false;
      if (xmin !== undefined && v <= xmin) return false;
      if (xmax !== undefined && v >= xmax) return false;
      const step = num("multipleOf");
      if (step !== undefined && !Number.isInteger(v / step)) return false;
    }
    if (typeof v === "string") {
      const length = [...v].length;
      const [least, most] = [num("minLength") ?? 0, num("maxLength") ?? Number.POSITIVE_INFINITY];
      if (length < least || length > most) return false;
      if (pattern && !pattern.test(v)) return false;
    }
    return true;
  });
}

/** Most characters an enum's values may spell and still be written as an automaton. */
const MAX_ENUM_SPELLING = 4_000;
/** Most characters a schema's enums spell as automata, all together (past it, XGrammar's own). */
const ENUMS_SPELLED = 40_000;

function spelledLength(atom: Atom | undefined): number {
  return atom && "literal" in atom ? atom.literal.length : 0;
}

/**
 * An enum of two or more plain values (strings, numbers, booleans, null) as the spelling of their
 * JSON texts, where XGrammar would write them as overlapping alternatives (it let "doa" through
 * `["do", "dog", ...]`); undefined for other enums, kept as XGrammar writes them.
 */
function enumSpelling(values: unknown, room: number): Spelling | undefined {
  if (!Array.isArray(values) || values.length < 2) return undefined;
  const plain = (v: unknown) => v === null || ["string", "number", "boolean"].includes(typeof v);
  if (!values.every(plain)) return undefined;
  const texts = [...new Set(values.map((v) => JSON.stringify(v)))];
  const length = texts.reduce((n, t) => n + t.length, 0);
  if (length > MAX_ENUM_SPELLING || length > room) return undefined;
  return texts.map((literal) => [{ literal }]);
}

/**
 * A string's length bounds as a pattern of unescaped characters: XGrammar 0.1.27 writes
 * `maxLength` as a class that excludes only the quote, backslash, CR and LF, which lets raw
 * control characters into the JSON text (a
 * backspace byte made a tool call's arguments unparseable), where a pattern's class is exact.
 * Escapes are not written inside a length-bound string. Undefined where a pattern or format rules.
 */
function lengthPattern(node: Record<string, unknown>, type: unknown): string | undefined {
  if (type !== "string" || node.pattern !== undefined || node.format !== undefined)
    return undefined;
  const min = typeof node.minLength === "number" ? node.minLength : undefined;
  const max = typeof node.maxLength === "number" ? node.maxLength : undefined;
  if (min === undefined && max === undefined) return undefined;
  return `^[^"\\\\\\x00-\\x1f]{${min ?? 0},${max ?? ""}}$`;
}
