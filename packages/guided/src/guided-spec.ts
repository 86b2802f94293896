import { createHash } from "node:crypto";
import { spellingEbnf } from "./spelling.js";

/**
 * What a guided completion must spell, as the grammar engine compiles it: one of vLLM's kinds
 * (`guided_json`, `json_object`, `guided_regex`, `guided_choice`, `guided_grammar`).
 */
export type GuidedSpec =
  | { kind: "json_schema"; schema: Record<string, unknown> }
  | { kind: "json_object" }
  | { kind: "regex"; pattern: string }
  | { kind: "choice"; choices: string[] }
  | { kind: "grammar"; ebnf: string }
  | {
      kind: "tool_calls";
      format: "hermes";
      tools: Array<{ name: string; parameters: Record<string, unknown> }>;
      /** At most one call (OpenAI's parallel_tool_calls: false). */
      single?: boolean;
    };

/** The wire's guided-decoding fields (the API sends one at most). */
export interface GuidedFields {
  json_schema?: Record<string, unknown> | undefined;
  json_object?: boolean | undefined;
  guided_regex?: string | undefined;
  guided_choice?: string[] | undefined;
  guided_grammar?: string | undefined;
  tool_calls_guide?:
    | {
        format: "hermes";
        tools: Array<{ name: string; parameters: Record<string, unknown> }>;
        single?: boolean | undefined;
      }
    | undefined;
}

/** The spec of a completion's guided fields, or undefined when it is not guided. */
export function guidedSpecOf(fields: GuidedFields): GuidedSpec | undefined {
  if (fields.json_schema !== undefined) return { kind: "json_schema", schema: fields.json_schema };
  if (fields.json_object === true) return { kind: "json_object" };
  if (fields.guided_regex !== undefined) return { kind: "regex", pattern: fields.guided_regex };
  if (fields.guided_choice !== undefined) return { kind: "choice", choices: fields.guided_choice };
  if (fields.guided_grammar !== undefined) return { kind: "grammar", ebnf: fields.guided_grammar };
  const calls = fields.tool_calls_guide;
  if (calls)
    return {
      kind: "tool_calls",
      format: calls.format,
      tools: calls.tools,
      ...(calls.single ? { single: true } : {}),
    };
  return undefined;
}

/** The name a spec is compiled and cached under: equal specs, equal keys. */
export function specKey(spec: GuidedSpec): string {
  return createHash("sha256").update(JSON.stringify(spec)).digest("base64url");
}

/** Most characters the choices may spell and still be written as an automaton. */
const MAX_CHOICE_SPELLING = 4_000;

/**
 * `choices` as an EBNF grammar that spells exactly one of them: as a deterministic automaton
 * (XGrammar 0.1.27 matches overlapping alternatives such as "do" | "dog" wrongly), or, past
 * MAX_CHOICE_SPELLING characters, as plain alternatives.
 */
export function choiceGrammar(choices: readonly string[]): string {
  const distinct = [...new Set(choices)];
  if (distinct.reduce((n, c) => n + c.length, 0) <= MAX_CHOICE_SPELLING)
    return spellingEbnf(
      distinct.map((literal) => [{ literal }]),
      "root",
    );
  return `root ::= ${distinct.map(ebnfString).join(" | ")}`;
}

/** `text` as an EBNF string literal: quotes, backslashes and control characters escaped. */
function ebnfString(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    // \u and four digits: XGrammar reads \x's hex digits on ("\x01abc" is one code point)
    else if (code < 0x20 || code === 0x7f) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}
