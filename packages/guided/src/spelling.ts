/**
 * A spelling: a finite language of texts given as alternatives of character classes, written
 * for XGrammar as a minimal deterministic automaton, one EBNF rule per state, each alternative
 * starting with its own characters. XGrammar 0.1.27 matches overlapping alternatives wrongly
 * (it took 681024 from `...|6810[01][0-9]|68102[0-3]`, and "doa" from the enum
 * `["cat", "category", "do", "dog"]`); a deterministic grammar leaves it nothing to merge.
 * Numbers (number-range.ts), enums and choices are written this way.
 */

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

/** Most states a spelling's automaton may have: a budget on what one schema keyword builds. */
export const MAX_SPELLING_STATES = 50_000;

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

function buildEbnf(spelling: Spelling, rule: string): string {
  if (spelling.length === 0) throw new Error("an empty spelling has no grammar");
  const { moves, accepting } = minimal(deterministic(spelling));
  const name = (state: number) => (state === 0 ? rule : `${rule}_${state}`);
  const rules: string[] = [];
  for (const [state, row] of moves.entries()) {
    const byTarget = new Map<number, string[]>();
    for (const [symbol, target] of row)
      byTarget.set(target, [...(byTarget.get(target) ?? []), symbol]);
    const alternatives = accepting[state] ? ['""'] : [];
    for (const [target, symbols] of byTarget)
      alternatives.push(`${characters(symbols)} ${name(target)}`);
    rules.push(`${name(state)} ::= ${alternatives.join(" | ")}`);
  }
  return rules.join("\n");
}

/** Characters as one EBNF element: a class where they are plain, else alternatives of literals. */
function characters(symbols: string[]): string {
  if (symbols.length === 1) return ebnfLiteral(symbols[0] ?? "");
  if (symbols.every((s) => /^[0-9A-Za-z]$/.test(s))) return `[${symbols.join("")}]`;
  return `(${symbols.map(ebnfLiteral).join(" | ")})`;
}

/** One character as an EBNF string literal: quote, backslash and control characters escaped. */
function ebnfLiteral(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  if (ch === '"' || ch === "\\") return `"\\${ch}"`;
  if (code < 0x20 || code === 0x7f) return `"\\x${code.toString(16).padStart(2, "0")}"`;
  return `"${ch}"`;
}

interface Automaton {
  /** Per state, its move on each character it takes. */
  moves: Array<Map<string, number>>;
  accepting: boolean[];
}

/** The characters an atom takes at one position. */
function classOf(
  atom: Exclude<Atom, { literal: string } | { min: number; max: number }>,
): string[] {
  if ("oneOf" in atom) return [...new Set(atom.oneOf)];
  return [...DIGITS.slice(atom.from, atom.to + 1)];
}

/** The alternatives as a deterministic automaton: a nondeterministic one, then its subsets. */
function deterministic(spelling: Spelling): Automaton {
  const edges: Array<Array<[ReadonlySet<string>, number]>> = [];
  const skips: number[][] = [];
  const ends = new Set<number>();
  const state = () => {
    skips.push([]);
    return edges.push([]) - 1;
  };
  const edge = (from: number, symbols: Iterable<string>) => {
    const set = new Set(symbols);
    const to = state();
    edges[from]?.push([set, to]);
    return to;
  };
  const start = state();
  for (const alternative of spelling) {
    let at = state();
    skips[start]?.push(at);
    for (const atom of alternative) {
      if ("literal" in atom) for (const ch of atom.literal) at = edge(at, [ch]);
      else if ("min" in atom) {
        const run = atom.oneOf ?? DIGITS;
        for (let i = 0; i < atom.min; i++) at = edge(at, run);
        if (atom.max === Number.POSITIVE_INFINITY) {
          // a run with no end: the state loops on its characters
          edges[at]?.push([new Set(run), at]);
          continue;
        }
        const end = state();
        for (let i = atom.min; i < atom.max; i++) {
          skips[at]?.push(end);
          at = edge(at, run);
        }
        skips[at]?.push(end);
        at = end;
      } else at = edge(at, classOf(atom));
    }
    ends.add(at);
  }
  const closure = (from: number[]): number[] => {
    const seen = new Set(from);
    const stack = [...from];
    for (let s = stack.pop(); s !== undefined; s = stack.pop())
      for (const t of skips[s] ?? [])
        if (!seen.has(t)) {
          seen.add(t);
          stack.push(t);
        }
    return [...seen].sort((a, b) => a - b);
  };
  const subsets = [closure([start])];
  const index = new Map([[subsets[0]?.join(","), 0]]);
  const moves: Array<Map<string, number>> = [];
  for (let i = 0; i < subsets.length; i++) {
    if (subsets.length > MAX_SPELLING_STATES)
      throw new Error(`the spelling needs more than ${MAX_SPELLING_STATES} states`);
    const bySymbol = new Map<string, number[]>();
    for (const s of subsets[i] ?? [])
      for (const [set, t] of edges[s] ?? [])
        for (const symbol of set) {
          const targets = bySymbol.get(symbol);
          if (targets) targets.push(t);
          else bySymbol.set(symbol, [t]);
        }
    const row = new Map<string, number>();
    for (const symbol of [...bySymbol.keys()].sort()) {
      const subset = closure(bySymbol.get(symbol) ?? []);
      const key = subset.join(",");
      let j = index.get(key);
      if (j === undefined) {
        j = subsets.push(subset) - 1;
        index.set(key, j);
      }
      row.set(symbol, j);
    }
    moves.push(row);
  }
  return { moves, accepting: subsets.map((subset) => subset.some((s) => ends.has(s))) };
}

/** The automaton with equivalent states merged (Moore's refinement), the start kept as 0. */
function minimal({ moves, accepting }: Automaton): Automaton {
  let block: number[] = accepting.map((a) => (a ? 1 : 0));
  for (;;) {
    const signatures = new Map<string, number>();
    const next = moves.map((row, s) => {
      // a row's moves are few and in the alphabet's order (deterministic() adds them so)
      let targets = "";
      for (const [sym, t] of row) targets += `${sym}${block[t]},`;
      const signature = `${block[s]}|${targets}`;
      let id = signatures.get(signature);
      if (id === undefined) {
        id = signatures.size;
        signatures.set(signature, id);
      }
      return id;
    });
    const stable = new Set(next).size === new Set(block).size;
    block = next;
    if (stable) break;
  }
  // renumber so that the start state's block is 0
  const order = new Map<number, number>([[block[0] ?? 0, 0]]);
  for (const b of block) if (!order.has(b)) order.set(b, order.size);
  const merged: Array<Map<string, number>> = Array.from({ length: order.size }, () => new Map());
  const finals: boolean[] = Array.from({ length: order.size }, () => false);
  for (const [s, row] of moves.entries()) {
    const to = order.get(block[s] ?? 0) ?? 0;
    finals[to] = accepting[s] ?? false;
    for (const [sym, t] of row) merged[to]?.set(sym, order.get(block[t] ?? 0) ?? 0);
  }
  return { moves: merged, accepting: finals };
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
