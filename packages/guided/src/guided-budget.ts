import { grammarExpansion } from "./grammar-expansion.js";
import type { GuidedSpec } from "./guided-spec.js";
import { regexProblem } from "./regex-budget.js";
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

/**
 * An EBNF grammar's length, then how deep its groups nest, parentheses in its strings and
 * character classes aside. Where a comment ends is XGrammar's lexer's to say (a `\r` ended one
 * this scan had read on, and 300 nested groups went past), so the grammar is read both with
 * `#` comments (to a `\n` or `\r`) and without, and the deeper reading counts: a quote in a
 * comment cannot hide groups from the one, nor a comment from the other.
 */
function grammarProblem(ebnf: string): string | undefined {
  if (ebnf.length > MAX_GRAMMAR_LENGTH)
    return `the grammar has ${ebnf.length} characters, more than ${MAX_GRAMMAR_LENGTH}`;
  const at = deepGroup(ebnf, true) ?? deepGroup(ebnf, false);
  if (at !== undefined)
    return `the grammar nests groups deeper than ${MAX_GRAMMAR_NESTING} levels (at character ${at})`;
  const size = Math.max(
    grammarExpansion(ebnf, true, MAX_GRAMMAR_EXPANSION),
    grammarExpansion(ebnf, false, MAX_GRAMMAR_EXPANSION),
  );
  return size > MAX_GRAMMAR_EXPANSION
    ? `the grammar writes out to more than ${MAX_GRAMMAR_EXPANSION} items once its counted repetitions are expanded`
    : undefined;
}

/** Where the grammar's groups first nest past the budget, reading `#` as a comment or not. */
function deepGroup(ebnf: string, comments: boolean): number | undefined {
  let depth = 0;
  // what closes the string, class or comment open: its quote or bracket, or the line's end
  let inside: string | undefined;
  for (let k = 0; k < ebnf.length; k++) {
    const c = ebnf[k];
    if (inside === "#") {
      if (c === "\n" || c === "\r") inside = undefined;
    } else if (inside !== undefined) {
      if (c === "\\") k++;
      else if (c === inside) inside = undefined;
    } else if (c === '"') inside = '"';
    else if (c === "[") inside = "]";
    else if (c === "#" && comments) inside = "#";
    else if (c === "(") {
      if (++depth > MAX_GRAMMAR_NESTING) return k;
    } else if (c === ")") depth = Math.max(0, depth - 1);
  }
  return undefined;
}
