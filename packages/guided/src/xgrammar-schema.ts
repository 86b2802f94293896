/**
 * A schema as XGrammar should compile it. Where a string has both `pattern` and `format`,
 * XGrammar spells the format alone, and zod writes both (`z.uuid()`: a version-checking pattern
 * beside `format: "uuid"`): the pattern is kept, the stricter of the two as zod writes them, and
 * JSON Schema 2020-12 makes a format an annotation by default anyway.
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
  return out;
}
