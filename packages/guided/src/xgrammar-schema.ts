import { BOUND_KEYWORDS, type BoundsPlan, boundsPlan, FIFTEEN_NINES } from "./number-bounds.js";

/**
 * An integer with no bounds, as it is written: 15 digits at most, every one exact in a double
 * (a client's JSON.parse), where XGrammar would let a model's digits run on to its last token.
 */
const FIFTEEN_DIGITS: BoundsPlan = {
  kind: "bounds",
  minimum: -FIFTEEN_NINES,
  maximum: FIFTEEN_NINES,
};

/**
 * A schema as XGrammar should compile it (the API's check has accepted it). Where a string has
 * both `pattern` and `format`, XGrammar spells the format alone, and zod writes both (`z.uuid()`:
 * a version-checking pattern beside `format: "uuid"`): the pattern is kept, the stricter as zod
 * writes them (JSON Schema 2020-12 makes a format an annotation by default anyway). An `anyOf`
 * branch with no type of its own is given its parent's (XGrammar reads a branch alone), and
 * numeric bounds are written the way XGrammar spells exactly (see `boundsPlan`).
 */
export function xgrammarSchema(schema: unknown, inheritedType?: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((s) => xgrammarSchema(s));
  if (typeof schema !== "object" || schema === null) return schema;
  const node = schema as Record<string, unknown>;
  const type = node.type ?? inheritedType;
  const out: Record<string, unknown> = {};
  if (inheritedType !== undefined && !("type" in node) && !("$ref" in node))
    out.type = inheritedType;
  const shadowed = typeof node.pattern === "string" && typeof node.format === "string";
  for (const [key, value] of Object.entries(node)) {
    if (shadowed && key === "format") continue;
    if (key === "enum" || key === "const")
      out[key] = value; // values, not schemas
    else if ((key === "anyOf" || key === "oneOf") && Array.isArray(value))
      out[key] = value.map((branch) => xgrammarSchema(branch, type));
    else out[key] = xgrammarSchema(value);
  }
  const length = lengthPattern(node);
  if (length) {
    delete out.minLength;
    delete out.maxLength;
    out.pattern = length;
  }
  const plan = boundsPlan(node, type) ?? (node.type === "integer" ? FIFTEEN_DIGITS : undefined);
  if (plan && plan.kind !== "refuse") {
    for (const key of BOUND_KEYWORDS) delete out[key];
    if (plan.kind === "spell") out.enum = plan.values;
    if (plan.kind === "bounds") Object.assign(out, plan);
    delete out.kind;
  }
  return out;
}

/**
 * A string's length bounds as a pattern of unescaped characters: XGrammar 0.1.27 writes
 * `maxLength` as a class that excludes only the quote, backslash, CR and LF, which lets raw
 * control characters into the JSON text (a
 * backspace byte made a tool call's arguments unparseable), where a pattern's class is exact.
 * Escapes are not written inside a length-bound string. Undefined where a pattern or format rules.
 */
function lengthPattern(node: Record<string, unknown>): string | undefined {
  if (node.type !== "string" || node.pattern !== undefined || node.format !== undefined)
    return undefined;
  const min = typeof node.minLength === "number" ? node.minLength : undefined;
  const max = typeof node.maxLength === "number" ? node.maxLength : undefined;
  if (min === undefined && max === undefined) return undefined;
  return `^[^"\\\\\\x00-\\x1f]{${min ?? 0},${max ?? ""}}$`;
}
