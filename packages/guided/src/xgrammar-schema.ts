/**
 * A schema as XGrammar should compile it. Where a string has both `pattern` and `format`,
 * XGrammar spells the format alone, and zod writes both (`z.uuid()`: a version-checking pattern
 * beside `format: "uuid"`): the pattern is kept, the stricter of the two as zod writes them, and
 * JSON Schema 2020-12 makes a format an annotation by default anyway. An `anyOf` branch with no
 * type of its own is given its parent's, and a small integer range is spelled out.
 */
export function xgrammarSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(xgrammarSchema);
  if (typeof schema !== "object" || schema === null) return schema;
  const node = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const shadowed = typeof node.pattern === "string" && typeof node.format === "string";
  for (const [key, value] of Object.entries(node)) {
    if (shadowed && key === "format") continue;
    // enum and const hold values, not schemas
    out[key] = key === "enum" || key === "const" ? value : xgrammarSchema(value);
  }
  const range = integerRange(node);
  if (range) {
    delete out.minimum;
    delete out.maximum;
    delete out.exclusiveMinimum;
    delete out.exclusiveMaximum;
    out.enum = range;
  }
  // XGrammar reads an anyOf branch alone: a branch with no type of its own takes its parent's
  if (node.type !== undefined)
    for (const key of ["anyOf", "oneOf"]) {
      const branches = out[key];
      if (Array.isArray(branches))
        out[key] = branches.map((b) =>
          typeof b === "object" && b !== null && !("type" in b) && !("$ref" in b)
            ? { type: node.type, ...b }
            : b,
        );
    }
  return out;
}

/** Most integers a bounded range is spelled out as (see `integerRange`). */
const MAX_SPELLED_RANGE = 1_024;

/**
 * A small bounded integer range as its values: XGrammar 0.1.27 writes some ranges too wide
 * (0..120 as `1[0-2][0-9]`, which takes 129), while a list of values is exact.
 */
function integerRange(node: Record<string, unknown>): number[] | undefined {
  if (node.type !== "integer" || node.enum !== undefined || node.const !== undefined)
    return undefined;
  const low = bound(node.minimum, node.exclusiveMinimum, 1);
  const high = bound(node.maximum, node.exclusiveMaximum, -1);
  if (low === undefined || high === undefined || high < low || high - low >= MAX_SPELLED_RANGE)
    return undefined;
  return Array.from({ length: high - low + 1 }, (_, i) => low + i);
}

/** The inclusive integer bound of `inclusive` / `exclusive` (`step` +1 for a lower, -1 for an upper). */
function bound(inclusive: unknown, exclusive: unknown, step: 1 | -1): number | undefined {
  const candidates: number[] = [];
  if (typeof inclusive === "number")
    candidates.push(step > 0 ? Math.ceil(inclusive) : Math.floor(inclusive));
  if (typeof exclusive === "number")
    candidates.push(step > 0 ? Math.floor(exclusive) + 1 : Math.ceil(exclusive) - 1);
  if (candidates.length === 0) return undefined;
  return step > 0 ? Math.max(...candidates) : Math.min(...candidates);
}
