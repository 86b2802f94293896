/**
 * A spelling: a language of texts given as alternatives of character classes and runs (a
 * number's range, an enum's values, a choice list, a format), written for XGrammar as a
 * deterministic automaton by automaton.ts (XGrammar 0.1.27 matches overlapping alternatives
 * wrongly: it took 681024 from `...|6810[01][0-9]|68102[0-3]`, "doa" from `["do", "dog"]`).
 */
import { automatonEbnf, type Budget, Nfa } from "./automaton.js";
import { normalize, type Ranges } from "./code-points.js";

/**
 * A piece of a spelling: a literal, one digit within a class, a run of `min` to `max` digits (or
 * of the characters `oneOf` names; `max` may be Infinity), one of some characters.
 */
export type Atom =
  | { literal: string }
  | { from: number; to: number }
  | { min: number; max: number; oneOf?: string }
  | { oneOf: string };
/** Alternatives, each a sequence of atoms. */
export type Spelling = Atom[][];

const DIGITS = "0123456789";

/** Every sequence of one alternative of each part, in order. */
export function product(...parts: Spelling[]): Spelling {
  let out: Spelling = [[]];
  for (const part of parts) out = out.flatMap((head) => part.map((tail) => [...head, ...tail]));
  return out;
}

/**
 * Texts spelled part after part, each part its own automaton: a format's date then its time, with
 * no automaton over their product. Parts meet where the next part's first character cannot
 * continue the one before (a date's day, then "T").
 */
export type Sequence = Spelling[];

/** The sequence as EBNF rules, `rule` the first and the start. */
export function sequenceEbnf(parts: Sequence, rule: string): string {
  if (parts.length === 1) return spellingEbnf(parts[0] ?? [], rule);
  const names = parts.map((_, i) => `${rule}_p${i}`);
  return [
    `${rule} ::= ${names.join(" ")}`,
    ...parts.map((part, i) => spellingEbnf(part, names[i] ?? rule)),
  ].join("\n");
}

/** Spellings' rules already built, by spelling (a format's, a schema's repeated range). */
const built = new Map<string, string>();
const MAX_BUILT = 256;
const PLACEHOLDER = "ferry_spelling_rule";

/** The spelling as EBNF rules (XGrammar's dialect), `rule` the first and the start. */
export function spellingEbnf(spelling: Spelling, rule: string): string {
  const key = JSON.stringify(spelling);
  let rules = built.get(key);
  if (rules === undefined) {
    rules = buildEbnf(spelling, PLACEHOLDER);
    if (built.size >= MAX_BUILT) built.delete(built.keys().next().value ?? "");
    built.set(key, rules);
  }
  return rules.replaceAll(PLACEHOLDER, rule);
}

/** A spelling's budgets: enums of 20,000 characters are tries of as many states. */
const BUDGET: Budget = { nfaStates: 200_000, states: 100_000, work: 5_000_000 };

function buildEbnf(spelling: Spelling, rule: string): string {
  if (spelling.length === 0) throw new Error("an empty spelling has no grammar");
  const nfa = new Nfa(BUDGET);
  const start = nfa.state();
  const end = nfa.state();
  for (const alternative of spelling) {
    let at = nfa.state();
    nfa.skip(start, at);
    for (const atom of alternative) at = atomMoves(nfa, atom, at);
    nfa.skip(at, end);
  }
  return automatonEbnf(nfa, start, end, rule, "raw", BUDGET);
}

/** An atom's moves from `at`; the state they end in. */
function atomMoves(nfa: Nfa, atom: Atom, from: number): number {
  let at = from;
  if ("literal" in atom) {
    for (const ch of atom.literal) {
      const cp = ch.codePointAt(0) ?? 0;
      at = nfa.edge(at, [[cp, cp]]);
    }
    return at;
  }
  if (!("min" in atom)) return nfa.edge(at, rangesOf(classOf(atom)));
  const run = rangesOf([...(atom.oneOf ?? DIGITS)]);
  for (let i = 0; i < atom.min; i++) at = nfa.edge(at, run);
  if (atom.max === Number.POSITIVE_INFINITY) {
    // a run with no end: the state loops on its characters
    nfa.loop(at, run);
    return at;
  }
  const end = nfa.state();
  for (let i = atom.min; i < atom.max; i++) {
    nfa.skip(at, end);
    at = nfa.edge(at, run);
  }
  nfa.skip(at, end);
  return end;
}

function rangesOf(characters: string[]): Ranges {
  return normalize(characters.map((ch) => [ch.codePointAt(0) ?? 0, ch.codePointAt(0) ?? 0]));
}

/** The characters an atom takes at one position. */
function classOf(
  atom: Exclude<Atom, { literal: string } | { min: number; max: number }>,
): string[] {
  if ("oneOf" in atom) return [...new Set(atom.oneOf)];
  return [...DIGITS.slice(atom.from, atom.to + 1)];
}

/** The spelling as a JavaScript regular expression matching a whole string (for tests). */
export function spellingRegExp(spelling: Spelling): RegExp {
  const quote = (text: string) => text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
  const inClass = (ch: string) => ch.replace(/[\\\]^-]/g, "\\$&");
  const atom = (a: Atom) => {
    if ("literal" in a) return quote(a.literal);
    if ("min" in a)
      return `[${[...(a.oneOf ?? DIGITS)].map(inClass).join("")}]{${a.min},${a.max === Number.POSITIVE_INFINITY ? "" : a.max}}`;
    return `[${classOf(a).map(inClass).join("")}]`;
  };
  return new RegExp(`^(?:${spelling.map((alt) => alt.map(atom).join("")).join("|")})$`, "u");
}
