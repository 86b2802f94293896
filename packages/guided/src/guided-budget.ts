import type { GuidedSpec } from "./guided-spec.js";
import { regexProblem } from "./regex-budget.js";
import { schemaProblem } from "./schema-budget.js";

/** Most tools a guided chat may offer (OpenAI's limit). */
export const MAX_TOOLS = 128;

/** Longest EBNF grammar taken, in characters. */
export const MAX_GRAMMAR_LENGTH = 65_536;

/**
 * Why `spec` cannot be guided by, as one line naming the budget, the keyword and where it
 * stands; undefined when it can. Cheap and bounded (no compiling): the API asks it before
 * anything is queued, so that no worker ever sees a spec it would refuse.
 */
export function guidedProblem(spec: GuidedSpec): string | undefined {
  switch (spec.kind) {
    case "json_schema": {
      const found = schemaProblem(spec.schema);
      return found && `at ${found.pointer}: ${found.message}`;
    }
    case "regex":
      return regexProblem(spec.pattern);
    case "grammar":
      return spec.ebnf.length > MAX_GRAMMAR_LENGTH
        ? `the grammar has ${spec.ebnf.length} characters, more than ${MAX_GRAMMAR_LENGTH}`
        : undefined;
    case "tool_calls": {
      if (spec.tools.length > MAX_TOOLS)
        return `${spec.tools.length} tools, more than ${MAX_TOOLS}`;
      for (const [i, tool] of spec.tools.entries()) {
        const found = schemaProblem(tool.parameters);
        if (found)
          return `at /tools/${i}/function/parameters${found.pointer === "/" ? "" : found.pointer}: ${found.message}`;
      }
      return undefined;
    }
    case "choice":
    case "json_object":
      return undefined;
  }
}
