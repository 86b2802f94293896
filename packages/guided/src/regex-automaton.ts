import { type AST, RegExpParser } from "@eslint-community/regexpp";
import {
  automatonEbnf,
  type Budget,
  type Context,
  type Length,
  Nfa,
  Unsupported,
} from "./automaton.js";
import { complement, intersect, normalize, type Ranges, UNIVERSE } from "./code-points.js";

/**
 * A regular expression as a minimal deterministic automaton in EBNF, for XGrammar: 0.1.27
 * matches a pattern whose alternatives overlap loosely (`[0-9]|[1-9][0-9]{4}|100000|-[1-9]`
 * let `10000` go on with 1..9), as it did numbers and enums (spelling.ts). Parsed by regexpp
 * (ESLint's ECMAScript parser), built as a Thompson automaton over code-point ranges and
 * written by automaton.ts.
 * Where a pattern uses what this does not build (lookaround, backreferences, \b, \p{...}, an
 * anchor inside), or its automaton passes its budget, the answer is undefined and XGrammar's
 * own regex is used.
 */

/** A pattern's budgets: 4,000 states, and a bounded time to find out. */
const BUDGET: Budget = { nfaStates: 4_000, states: 4_000, work: 400_000 };

const LINE_TERMINATORS: Ranges = [
  [0x0a, 0x0a],
  [0x0d, 0x0d],
  [0x2028, 0x2029],
];
const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: Ranges = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);

/** Where the pattern's text is written: as it is, or inside a JSON string (escaped). */
export type RegexContext = Context;

const built = new Map<string, string | null>();
const MAX_BUILT = 128;

/**
 * The pattern as EBNF rules, `rule` the first: the text matched whole (`raw`), or a JSON string
 * whose value it matches, quotes included (`json-string`), within `length` where given (a
 * string's minLength/maxLength beside its pattern); undefined where it cannot be built.
 */
export function regexEbnf(
  pattern: string,
  rule: string,
  context: RegexContext,
  length?: Length,
): string | undefined {
  const key = `${context}\u0000${length?.min},${length?.max}\u0000${pattern}`;
  let rules = built.get(key);
  if (rules === undefined) {
    rules = build(pattern, context, length) ?? null;
    if (built.size >= MAX_BUILT) built.delete(built.keys().next().value ?? "");
    built.set(key, rules);
  }
  return rules === null ? undefined : rules.replaceAll(PLACEHOLDER, rule);
}

const PLACEHOLDER = "ferry_regex_rule";

function build(pattern: string, context: RegexContext, length?: Length): string | undefined {
  let ast: AST.Pattern;
  try {
    ast = new RegExpParser({ ecmaVersion: 2024 }).parsePattern(pattern, 0, pattern.length, {
      unicode: true,
    });
  } catch {
    return undefined;
  }
  try {
    const nfa = new Thompson(BUDGET);
    const start = nfa.state();
    const end = nfa.state();
    for (const alternative of ast.alternatives) {
      const elements = [...alternative.elements];
      // anchors at either end of a top-level alternative: the match is whole anyway
      if (elements[0]?.type === "Assertion" && elements[0].kind === "start") elements.shift();
      const last = elements[elements.length - 1];
      if (last?.type === "Assertion" && last.kind === "end") elements.pop();
      const from = nfa.state();
      nfa.skip(start, from);
      nfa.skip(nfa.sequence(elements, from), end);
    }
    const rule = context === "json-string" ? `${PLACEHOLDER}_s` : PLACEHOLDER;
    const body = automatonEbnf(nfa, start, end, rule, context, BUDGET, length);
    return context === "json-string"
      ? `${PLACEHOLDER} ::= "\\"" ${PLACEHOLDER}_s "\\""\n${body}`
      : body;
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
}

/** The automaton of a pattern's syntax tree (Thompson's construction). */
class Thompson extends Nfa {
  sequence(elements: readonly AST.Element[], from: number): number {
    let at = from;
    for (const element of elements) at = this.element(element, at);
    return at;
  }

  alternatives(alternatives: readonly AST.Alternative[], from: number): number {
    const end = this.state();
    for (const alternative of alternatives) {
      const start = this.state();
      this.skip(from, start);
      this.skip(this.sequence(alternative.elements, start), end);
    }
    return end;
  }

  element(element: AST.Element, from: number): number {
    switch (element.type) {
      case "Character":
        return this.edge(from, [[element.value, element.value]]);
      case "CharacterSet":
        return this.edge(from, setRanges(element));
      case "CharacterClass":
        return this.edge(from, classRanges(element));
      case "Group":
      case "CapturingGroup":
        return this.alternatives(element.alternatives, from);
      case "Quantifier":
        return this.quantifier(element, from);
      default:
        throw new Unsupported(element.type);
    }
  }

  quantifier(q: AST.Quantifier, from: number): number {
    let at = from;
    for (let i = 0; i < q.min; i++) at = this.element(q.element, at);
    if (q.max === Number.POSITIVE_INFINITY) {
      const loop = this.state();
      this.skip(at, loop);
      this.skip(this.element(q.element, loop), loop);
      return loop;
    }
    const end = this.state();
    for (let i = q.min; i < q.max; i++) {
      this.skip(at, end);
      at = this.element(q.element, at);
    }
    this.skip(at, end);
    return end;
  }
}

function setRanges(set: AST.CharacterSet): Ranges {
  switch (set.kind) {
    case "any":
      return complement(LINE_TERMINATORS);
    case "digit":
      return set.negate ? complement(DIGIT) : DIGIT;
    case "space":
      return set.negate ? complement(SPACE) : SPACE;
    case "word":
      return set.negate ? complement(WORD) : WORD;
    default:
      throw new Unsupported(`character set ${set.kind}`);
  }
}

function classRanges(node: AST.CharacterClass): Ranges {
  const ranges: Ranges = [];
  for (const element of node.elements) {
    if (element.type === "Character") ranges.push([element.value, element.value]);
    else if (element.type === "CharacterClassRange")
      ranges.push([element.min.value, element.max.value]);
    else if (element.type === "CharacterSet") ranges.push(...setRanges(element));
    else throw new Unsupported(element.type);
  }
  const set = intersect(normalize(ranges), UNIVERSE);
  return node.negate ? complement(set) : set;
}
