import { z } from "@hono/zod-openapi";
import { jsonWeight } from "../http/json-weight.js";
import { MAX_TOOLS_JSON } from "../http/schemas.js";

/**
 * The most a schema sent as JSON text may weigh (`jsonWeight`; a body's own weight prices a
 * string as its characters): room for any schema within the guided budgets (2,048 subschemas
 * of ~300 each, and their descriptions' text), ~17 ms of the loop at most.
 */
const MAX_SCHEMA_TEXT_WEIGHT = 4 * MAX_TOOLS_JSON;

/**
 * A JSON schema as vLLM takes one: an object, or its JSON text (the worker refuses the
 * keywords it cannot guide by, by name).
 */
export const jsonSchema = z.union([
  z.record(z.string(), z.unknown()),
  z.string().transform((text, ctx) => {
    // weighed before it is parsed, as a body is: inside a string, 8 MB of `{}` had weighed as
    // text and cost the loop ~1.2 s (review)
    if (jsonWeight(text, MAX_SCHEMA_TEXT_WEIGHT) === undefined) {
      ctx.addIssue({
        code: "custom",
        message: `a JSON schema's text may cost at most what ${MAX_SCHEMA_TEXT_WEIGHT} bytes of numbers do to read (each object, list, string and property priced as the body's are)`,
      });
      return z.NEVER;
    }
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed))
        return parsed as Record<string, unknown>;
    } catch {
      // refused below
    }
    ctx.addIssue({ code: "custom", message: "not a JSON schema (an object, or its JSON text)" });
    return z.NEVER;
  }),
]);
