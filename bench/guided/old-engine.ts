import type { GuidedSpec } from "@ferry/guided";
import type { Tokenizer } from "@ferry/model-repository";
import { GrammarGuide } from "../../apps/worker/src/generation/guide.js";
import { JsonObjectGrammar } from "../../apps/worker/src/generation/json-grammar.js";
import { schemaToRegex } from "../../apps/worker/src/generation/json-schema-regex.js";
import { escapeRegex, RegexGrammar } from "../../apps/worker/src/generation/regex-grammar.js";

/** The hand-written engine (a schema as one regular expression, its automaton walked per byte). */
export function oldGuide(spec: GuidedSpec, tokenizer: Tokenizer, size: number): GrammarGuide {
  const grammar =
    spec.kind === "json_object"
      ? new JsonObjectGrammar()
      : new RegexGrammar(
          spec.kind === "choice"
            ? spec.choices.map(escapeRegex).join("|")
            : spec.kind === "regex"
              ? spec.pattern
              : spec.kind === "json_schema"
                ? schemaToRegex(spec.schema)
                : (() => {
                    throw new Error("EBNF grammars are not supported");
                  })(),
        );
  return new GrammarGuide(grammar, tokenizer, size);
}
