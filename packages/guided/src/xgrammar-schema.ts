/**
 * A schema as XGrammar should compile it. Where a string has both `pattern` and `format`,
 * XGrammar spells the format alone, and zod writes both (`z.uuid()`: a version-checking pattern
 * beside `format: "uuid"`): the pattern is kept, the stricter of the two as zod writes them, and
 * JSON Schema 2020-12 makes a format an annotation by default anyway. And an `anyOf` branch
 * with no type of its own is given its parent's.
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
