import { nestsWithin } from "@ferry/protocol";
import { boundsPlan } from "./number-bounds.js";
import { countedOptionals, MAX_PROPERTY_COUNTED_OPTIONALS } from "./property-count-budget.js";
import { regexProblem } from "./regex-budget.js";

/**
 * Most schema objects one spec may hold, a request's tools together (each `$def` counted once:
 * references are not expanded). XGrammar's compile time grows faster than their number
 * (measured on its thread: 2,048 properties in 16 objects 1.5 s, 3,000 2-2.4 s, 6,000 6.6 s,
 * 4,500 objects of one property 4.7 s, an anyOf of 9,000 strings with a maxLength 5 s), and
 * the 10,000 allowed before let one 59 KB schema hold a model's grammar thread for its whole
 * compile budget, every other guided request of that model behind it.
 */
export const MAX_SCHEMA_NODES = 2_048;
/**
 * Deepest nesting of schema objects (references not followed). XGrammar's converter recurses
 * on its WebAssembly stack, which 56 nested objects, or 32 arrays of objects, overran.
 */
export const MAX_SCHEMA_DEPTH = 32;
/**
 * Deepest nesting with every `$ref` followed, each reference a level: 40 definitions each an
 * object whose property refers to the next overran XGrammar's stack (32 compiled), 200 aliases
 * of aliases (64 compiled), 80 levels of anyOf over references (40 compiled).
 */
export const MAX_REFERENCED_DEPTH = 64;
/** Largest count a length or item bound may name: XGrammar writes bounded repetition out. */
export const MAX_SCHEMA_COUNT = 10_000;
/**
 * Deepest nesting of the schema as JSON, `enum` and `const` values included (data, which the
 * budgets above do not walk): a value nested 5,000 levels overflowed the stack of every
 * JSON.stringify after it. Twice the JSON levels MAX_SCHEMA_DEPTH's schemas take, and more.
 */
export const MAX_SCHEMA_JSON_DEPTH = 128;
/** Most values one `enum` may list. */
export const MAX_ENUM_VALUES = 1_024;
/** Most bounded numbers one schema may hold: each is spelled as an automaton of its own. */
export const MAX_BOUNDED_NUMBERS = 64;
/**
 * Most alternatives their spellings may have together: a range with bounds of 15 significant
 * digits spells ~90 and costs XGrammar ~200 ms to compile (16 took 3.8 s), `0..1` ~15.
 */
export const MAX_SPELLED_ALTERNATIVES = 1_500;
/** Most patterns one schema may hold: each is built as an automaton of its own. */
export const MAX_SCHEMA_PATTERNS = 256;

/** Keywords that only describe: they change no answer. */
export const DESCRIPTIVE = new Set([
  "title",
  "description",
  "examples",
  "default",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "strict",
  "$anchor",
  "propertyOrdering",
]);

/** Keywords whose value is a map of schemas. */
const SCHEMA_MAPS = new Set(["properties", "$defs", "definitions"]);
/** Keywords whose value is a list of schemas. */
const SCHEMA_LISTS = new Set(["anyOf", "oneOf"]);
/** Keywords whose value is one schema (or a boolean). */
const SCHEMA_VALUES = new Set(["items", "additionalProperties"]);
/** Keywords whose value is a count. */
const COUNTS = new Set([
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "minProperties",
  "maxProperties",
]);
const NUMBERS = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);
/**
 * Keywords XGrammar applies only beside a `type` (its own or, in an `anyOf` branch, the
 * parent's): without one it writes any JSON value, so they are refused there.
 */
const TYPED = new Set([...NUMBERS, "minLength", "maxLength", "pattern", "format"]);
const TYPES = new Set(["object", "array", "string", "integer", "number", "boolean", "null"]);
/** The `format`s XGrammar spells (the others would be ignored, so they are refused). */
export const FORMATS = new Set([
  "email",
  "date",
  "time",
  "date-time",
  "duration",
  "ipv4",
  "ipv6",
  "hostname",
  "uuid",
  "uri",
  "uri-reference",
  "uri-template",
  "json-pointer",
  "relative-json-pointer",
]);

/** What is wrong with a schema, and where (a JSON pointer into it). */
export interface SchemaProblem {
  pointer: string;
  message: string;
}

/**
 * Why the grammar engine cannot take `schema`, or undefined when it can: read once, each
 * `$def` once (a `$ref` is resolved, never expanded), within a budget of objects and depth, every
 * keyword that would constrain the answer either applied or refused by name with its JSON
 * pointer (never silently ignored), every `pattern` held to the regular-expression budget.
 */
export function schemaProblem(
  schema: unknown,
  /**
   * The spec's objects counted so far (and the optional properties of objects that bound their
   * count), and what they are: a request's tools count together.
   */
  counted: { nodes: number; optionals?: number; of?: string } = { nodes: 0 },
): SchemaProblem | undefined {
  if (!nestsWithin(schema, MAX_SCHEMA_JSON_DEPTH))
    return {
      pointer: "/",
      message: `the schema nests deeper than ${MAX_SCHEMA_JSON_DEPTH} levels of JSON (enum and const values included)`,
    };
  let bounded = 0;
  let spelled = 0;
  let patterns = 0;
  const problem = (pointer: string, message: string): SchemaProblem => ({
    pointer: pointer || "/",
    message,
  });
  const visit = (
    node: unknown,
    pointer: string,
    depth: number,
    parentType?: unknown,
  ): SchemaProblem | undefined => {
    if (typeof node === "boolean") return undefined;
    if (typeof node !== "object" || node === null || Array.isArray(node))
      return problem(pointer, "a schema must be an object or a boolean");
    if (++counted.nodes > MAX_SCHEMA_NODES)
      return problem(
        pointer,
        `${counted.of ?? "the schema has"} more than ${MAX_SCHEMA_NODES} subschemas`,
      );
    const own = node as Record<string, unknown>;
    const optionals = countedOptionals(own);
    if (optionals > 0) {
      counted.optionals = (counted.optionals ?? 0) + optionals;
      if (counted.optionals > MAX_PROPERTY_COUNTED_OPTIONALS)
        return problem(
          pointer,
          `${counted.of ?? "the schema has"} more than ${MAX_PROPERTY_COUNTED_OPTIONALS} optional properties in objects with minProperties or maxProperties (they would not compile in time): make them required, or drop the bound`,
        );
    }
    // a list of types is written as an anyOf of one branch a type: a level of its own
    depth += splitLevel(own);
    if (depth > MAX_SCHEMA_DEPTH)
      return problem(pointer, `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
    const type = own.type ?? parentType;
    const typed = type !== undefined || "enum" in own || "const" in own;
    const bounds = typed ? boundsPlan(own, type) : undefined;
    if (bounds?.kind === "refuse") return problem(`${pointer}/${bounds.keyword}`, bounds.why);
    if (bounds?.kind === "range" && ++bounded > MAX_BOUNDED_NUMBERS)
      return problem(pointer, `the schema bounds more than ${MAX_BOUNDED_NUMBERS} numbers`);
    if (bounds?.kind === "range") spelled += bounds.spelling.length;
    if (spelled > MAX_SPELLED_ALTERNATIVES)
      return problem(
        pointer,
        `the schema's numeric bounds spell more than ${MAX_SPELLED_ALTERNATIVES} alternatives (bounds with fewer significant digits spell fewer)`,
      );
    if (typeof own.pattern === "string" && ++patterns > MAX_SCHEMA_PATTERNS)
      return problem(
        `${pointer}/pattern`,
        `the schema has more than ${MAX_SCHEMA_PATTERNS} patterns`,
      );
    for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
      const at = `${pointer}/${escapePointer(key)}`;
      if (TYPED.has(key) && !typed)
        return problem(at, `${key} needs a type beside it (without one any JSON value is written)`);
      const found = visitKeyword(key, value, at, depth, schema, visit, problem, type);
      if (found) return found;
    }
    return undefined;
  };
  return visit(schema, "", 0) ?? referencedDepthProblem(schema);
}

/**
 * The schema's depth as XGrammar's converter recurses through it, every `$ref` followed into
 * its target (not `$defs` themselves: a definition is converted where it is referenced). A
 * reference back into the path it is on is recursion, a rule already being written, and adds
 * nothing; each node's depth below it is worked out once, so references that fan out cost no
 * more than the schema's size. Read apart from the nesting budget, a chain of 2,000
 * definitions, each holding a reference to the next, had passed it and trapped XGrammar.
 */
function referencedDepthProblem(schema: unknown): SchemaProblem | undefined {
  const below = new Map<object, number>();
  const onPath = new Set<object>();
  // past the budget the answer is known: the walk stops there (a chain of 10,000 would
  // otherwise take this thread's own stack as deep)
  let past = false;
  const depthBelow = (node: unknown): number => {
    if (past || !isObject(node) || onPath.has(node)) return 0;
    if (onPath.size > MAX_REFERENCED_DEPTH) {
      past = true;
      return 0;
    }
    const known = below.get(node);
    if (known !== undefined) return known;
    onPath.add(node);
    let deepest = splitLevel(node);
    const split = deepest;
    const child = (sub: unknown) => {
      deepest = Math.max(deepest, split + 1 + depthBelow(sub));
    };
    for (const [key, value] of Object.entries(node)) {
      if (key === "properties" && isObject(value))
        for (const sub of Object.values(value)) child(sub);
      else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) for (const sub of value) child(sub);
      else if (SCHEMA_VALUES.has(key)) child(value);
      else if (key === "$ref" && typeof value === "string") child(resolveRef(schema, value));
    }
    onPath.delete(node);
    below.set(node, deepest);
    return deepest;
  };
  const depth = depthBelow(schema);
  return past || depth > MAX_REFERENCED_DEPTH
    ? {
        pointer: "/",
        message: `the schema nests deeper than ${MAX_REFERENCED_DEPTH} levels through its $refs`,
      }
    : undefined;
}

/**
 * The level a node's list of types adds: `xgrammarSchema` writes it as an anyOf with a branch
 * a type, which XGrammar's converter recurses through (a chain of 28 definitions of
 * `type: ["object", "null"]` trapped it where 31 plain objects compiled).
 */
function splitLevel(node: Record<string, unknown>): number {
  return Array.isArray(node.type) && node.type.length > 1 ? 1 : 0;
}

/** The node a `$ref` (checked already by `refProblem`) points at. */
function resolveRef(root: unknown, ref: string): unknown {
  let node: unknown = root;
  for (const part of ref.slice(2).split("/").filter(Boolean)) {
    if (!isObject(node)) return undefined;
    node = node[part];
  }
  return node;
}

type Visit = (
  node: unknown,
  pointer: string,
  depth: number,
  parentType?: unknown,
) => SchemaProblem | undefined;

function visitKeyword(
  key: string,
  value: unknown,
  at: string,
  depth: number,
  root: unknown,
  visit: Visit,
  problem: (pointer: string, message: string) => SchemaProblem,
  /** The type the node has (its own or its parent's): its anyOf branches take it. */
  type: unknown,
): SchemaProblem | undefined {
  if (DESCRIPTIVE.has(key)) return undefined;
  if (SCHEMA_MAPS.has(key)) {
    if (!isObject(value)) return problem(at, `${key} must be an object of schemas`);
    for (const [name, sub] of Object.entries(value)) {
      const found = visit(sub, `${at}/${escapePointer(name)}`, depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  if (SCHEMA_LISTS.has(key)) {
    if (!Array.isArray(value) || value.length === 0)
      return problem(at, `${key} must be a non-empty list of schemas`);
    // a branch takes its parent's type (xgrammarSchema writes it in)
    for (const [i, sub] of value.entries()) {
      const found = visit(sub, `${at}/${i}`, depth + 1, type);
      if (found) return found;
    }
    return undefined;
  }
  if (SCHEMA_VALUES.has(key)) {
    if (key === "items" && Array.isArray(value))
      return problem(
        at,
        "items as a list (a tuple) is not supported; give one schema for every item",
      );
    return visit(value, at, depth + 1);
  }
  if (COUNTS.has(key)) {
    if (!Number.isInteger(value) || (value as number) < 0)
      return problem(at, `${key} must be a non-negative integer`);
    if ((value as number) > MAX_SCHEMA_COUNT)
      return problem(at, `${key} ${value} is more than ${MAX_SCHEMA_COUNT}`);
    return undefined;
  }
  if (NUMBERS.has(key)) {
    // draft 4 writes exclusiveMinimum/-Maximum as a boolean beside minimum/maximum
    if (typeof value === "boolean" && key.startsWith("exclusive")) return undefined;
    if (typeof value !== "number" || !Number.isFinite(value))
      return problem(at, `${key} must be a number`);
    if (key === "multipleOf" && value <= 0) return problem(at, "multipleOf must be above 0");
    return undefined;
  }
  switch (key) {
    case "type": {
      const types = Array.isArray(value) ? value : [value];
      const wrong = types.find((t) => typeof t !== "string" || !TYPES.has(t));
      return wrong === undefined && types.length > 0
        ? undefined
        : problem(at, `type ${JSON.stringify(wrong)} is not a JSON Schema type`);
    }
    case "required":
      return Array.isArray(value) && value.every((v) => typeof v === "string")
        ? undefined
        : problem(at, "required must be a list of property names");
    case "enum":
      if (!Array.isArray(value) || value.length === 0)
        return problem(at, "enum must be a non-empty list");
      return value.length > MAX_ENUM_VALUES
        ? problem(at, `enum lists ${value.length} values, more than ${MAX_ENUM_VALUES}`)
        : undefined;
    case "const":
      return undefined;
    case "pattern": {
      if (typeof value !== "string") return problem(at, "pattern must be a string");
      const why = regexProblem(value);
      return why ? problem(at, `pattern: ${why}`) : undefined;
    }
    case "format":
      return typeof value === "string" && FORMATS.has(value)
        ? undefined
        : problem(
            at,
            `format ${JSON.stringify(value)} is not supported (supported: ${[...FORMATS].join(", ")})`,
          );
    case "$ref":
      return refProblem(value, root, at, problem);
    default:
      return problem(at, `keyword '${key}' is not supported`);
  }
}

function refProblem(
  ref: unknown,
  root: unknown,
  at: string,
  problem: (pointer: string, message: string) => SchemaProblem,
): SchemaProblem | undefined {
  if (typeof ref !== "string" || (ref !== "#" && !ref.startsWith("#/")))
    return problem(at, "$ref must point into this schema ('#' or '#/...')");
  if (/~|%/.test(ref))
    return problem(at, "$ref with escaped characters (~0, ~1, %) is not supported");
  let node: unknown = root;
  for (const part of ref.slice(2).split("/").filter(Boolean)) {
    if (!isObject(node) || !(part in node))
      return problem(at, `$ref ${ref} points at nothing in this schema`);
    node = node[part];
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function escapePointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}
