import { readGrammar } from "./grammar-reading.js";
import type { GuidedSpec } from "./guided-spec.js";
import { regexProblem } from "./regex-budget.js";
import { loopCopiesProblem, MAX_COPIES_OF_A_LOOP } from "./repetition-loops.js";
import { schemaProblem } from "./schema-budget.js";

/** Most tools a guided chat may offer (OpenAI's limit). */
export const MAX_TOOLS = 128;

/** Longest EBNF grammar taken, in characters. */
export const MAX_GRAMMAR_LENGTH = 65_536;
/**
 * Deepest nesting of an EBNF grammar's groups: XGrammar's parser recurses on its WebAssembly
 * stack, and 200 nested parentheses trapped it (150 compiled).
 */
export const MAX_GRAMMAR_NESTING = 64;
/**
 * Most items an EBNF grammar may stand for once its counted repetitions are written out
 * (`grammarExpansion`), as a pattern's: nested counts multiply, and XGrammar's compile time
 * with them (three nested `{0,999}` ran past the worker's compile budget).
 */
export const MAX_GRAMMAR_EXPANSION = 100_000;

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
      return grammarProblem(spec.ebnf);
    case "tool_calls": {
      if (spec.tools.length > MAX_TOOLS)
        return `${spec.tools.length} tools, more than ${MAX_TOOLS}`;
      // the tools' schemas become one grammar: their objects count together
      const counted = { nodes: 0, of: "the tools' schemas have together" };
      for (const [i, tool] of spec.tools.entries()) {
        const found = schemaProblem(tool.parameters, counted);
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

/**
 * An EBNF grammar's length, then how deep its groups nest and how large it is written out,
 * read both with `#` comments and without, the worse reading counting: a quote in a comment
 * cannot hide groups from the one, nor a comment ended where XGrammar ends it (a `\r` had
 * hidden 300 nested groups) from the other.
 */
function grammarProblem(ebnf: string): string | undefined {
  if (ebnf.length > MAX_GRAMMAR_LENGTH)
    return `the grammar has ${ebnf.length} characters, more than ${MAX_GRAMMAR_LENGTH}`;
  const budgets = { maxNesting: MAX_GRAMMAR_NESTING, cap: MAX_GRAMMAR_EXPANSION };
  const readings = [readGrammar(ebnf, true, budgets), readGrammar(ebnf, false, budgets)];
  const at = readings.find((r) => r.nestedPastAt !== undefined)?.nestedPastAt;
  if (at !== undefined)
    return `the grammar nests groups deeper than ${MAX_GRAMMAR_NESTING} levels (at character ${at})`;
  if (readings.some((r) => r.size > MAX_GRAMMAR_EXPANSION))
    return `the grammar writes out to more than ${MAX_GRAMMAR_EXPANSION} items once its counted repetitions are expanded`;
  const copies = Math.max(...readings.map((r) => r.loopCopies));
  return copies > MAX_COPIES_OF_A_LOOP ? loopCopiesProblem("the grammar", copies) : undefined;
}
