import { BOUND_KEYWORDS, boundsPlan } from "./number-bounds.js";

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
  const plan = boundsPlan(node, type);
  if (plan && plan.kind !== "refuse") {
    for (const key of BOUND_KEYWORDS) delete out[key];
    if (plan.kind === "spell") out.enum = plan.values;
    if (plan.kind === "bounds") Object.assign(out, plan);
    delete out.kind;
  }
  return out;
}
