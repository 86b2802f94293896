/**
 * An automaton written as EBNF that XGrammar 0.1.27 matches right. XGrammar matches a grammar
 * whose alternatives overlap loosely (it took 681024 from `...|6810[01][0-9]|68102[0-3]`, "doa"
 * from the enum `["do", "dog", ...]`, 100001 from a pattern `...|[1-9][0-9]{4}|100000|...`), so
 * numbers, enums, choices, formats and patterns are written as deterministic automata: a
 * nondeterministic one over code-point ranges (built by spelling.ts or regex-automaton.ts), made
 * deterministic by subsets and minimal by Moore's refinement, one rule per state, each
 * alternative starting with characters of its own.
 */

import { complement, contains, intersect, type Ranges, UNIVERSE } from "./code-points.js";

/** Past a budget: the automaton is not built (the caller falls back to XGrammar's own). */
export class Unsupported extends Error {}

/** Budgets on building one automaton. */
export interface Budget {
  /** Most states of the nondeterministic automaton. */
  nfaStates: number;
  /** Most states of the deterministic one. */
  states: number;
  /** Most automaton states visited while building it (subset sizes summed): a time budget. */
  work: number;
}

/** Most states an automaton may have to be made minimal (Moore's takes a pass per state). */
const MAX_MINIMIZED = 400;

export class Nfa {
  constructor(private readonly budget: Budget) {}

  readonly edges: Array<Array<[Ranges, number]>> = [];
  readonly skips: number[][] = [];

  state(): number {
    if (this.edges.length >= this.budget.nfaStates) throw new Unsupported("too many states");
    this.skips.push([]);
    return this.edges.push([]) - 1;
  }

  skip(from: number, to: number): void {
    this.skips[from]?.push(to);
  }

  edge(from: number, ranges: Ranges): number {
    const to = this.state();
    this.edges[from]?.push([ranges, to]);
    return to;
  }

  /** A move on `ranges` from a state back to itself (a run with no end). */
  loop(at: number, ranges: Ranges): void {
    this.edges[at]?.push([ranges, at]);
  }
}

/** Where the text is written: as it is, or inside a JSON string (escaped). */
export type Context = "raw" | "json-string";

/**
 * The automaton from `start` to `end` as EBNF rules, `rule` the first and the start; a minimal
 * one where it has at most a few hundred states (past that, as deterministic as built).
 */
export function automatonEbnf(
  nfa: Nfa,
  start: number,
  end: number,
  rule: string,
  context: Context,
  budget: Budget,
  length?: Length,
): string {
  const whole = deterministic(nfa, start, end, budget);
  const found = length ? withLength(whole, length, budget) : whole;
  const dfa = found.moves.length <= MAX_MINIMIZED ? minimal(found, budget) : found;
  return emit(dfa, rule, context);
}

/** Bounds on a text's length in code points (a string's minLength / maxLength). */
export interface Length {
  min: number;
  max?: number;
}

/**
 * The automaton's texts whose length is within `length`: states paired with the characters
 * read so far (up to the maximum, or counted up to the minimum where there is none).
 */
function withLength(dfa: Dfa, { min, max }: Length, budget: Budget): Dfa {
  const cap = max ?? min;
  const index = new Map<string, number>();
  const pairs: Array<[number, number]> = [];
  const id = (state: number, count: number) => {
    const key = `${state},${count}`;
    let n = index.get(key);
    if (n === undefined) {
      if (pairs.length >= budget.states) throw new Unsupported("too many states");
      n = pairs.push([state, count]) - 1;
      index.set(key, n);
    }
    return n;
  };
  id(0, 0);
  const moves: Dfa["moves"] = [];
  const accepting: boolean[] = [];
  for (let i = 0; i < pairs.length; i++) {
    const [state, count] = pairs[i] as [number, number];
    accepting.push((dfa.accepting[state] ?? false) && count >= min);
    const next = max === undefined ? Math.min(count + 1, cap) : count + 1;
    moves.push(
      next > cap && max !== undefined
        ? []
        : (dfa.moves[state] ?? []).map(
            ([lo, hi, t]) => [lo, hi, id(t, next)] as [number, number, number],
          ),
    );
  }
  return { moves, accepting };
}

/** A deterministic automaton: per state, its moves as [lo, hi, target], sorted by lo. */
interface Dfa {
  moves: Array<Array<[number, number, number]>>;
  accepting: boolean[];
}

function deterministic(nfa: Nfa, start: number, end: number, budget: Budget): Dfa {
  let work = 0;
  const closure = (from: number[]): number[] => {
    const seen = new Set(from);
    const stack = [...from];
    for (let s = stack.pop(); s !== undefined; s = stack.pop())
      for (const t of nfa.skips[s] ?? [])
        if (!seen.has(t)) {
          seen.add(t);
          stack.push(t);
          if (++work > budget.work) throw new Unsupported("too much work");
        }
    work += from.length;
    return [...seen].sort((a, b) => a - b);
  };
  const subsets = [closure([start])];
  const index = new Map([[subsets[0]?.join(","), 0]]);
  const moves: Dfa["moves"] = [];
  for (let i = 0; i < subsets.length; i++) {
    if (subsets.length > budget.states) throw new Unsupported("too many states");
    const edges: Array<[Ranges, number]> = [];
    for (const s of subsets[i] ?? []) edges.push(...(nfa.edges[s] ?? []));
    // cut the code points where any edge's range starts or ends, then move on each piece
    const cuts = new Set<number>();
    for (const [ranges] of edges)
      for (const [lo, hi] of ranges) {
        cuts.add(lo);
        cuts.add(hi + 1);
      }
    const points = [...cuts].sort((a, b) => a - b);
    const row: Array<[number, number, number]> = [];
    for (let k = 0; k + 1 < points.length; k++) {
      const lo = points[k] as number;
      const hi = (points[k + 1] as number) - 1;
      work += edges.length;
      if (work > budget.work) throw new Unsupported("too much work");
      const targets = edges.filter(([ranges]) => contains(ranges, lo)).map(([, t]) => t);
      if (targets.length === 0) continue;
      const subset = closure(targets);
      const key = subset.join(",");
      let j = index.get(key);
      if (j === undefined) {
        j = subsets.push(subset) - 1;
        index.set(key, j);
      }
      const last = row[row.length - 1];
      if (last && last[2] === j && last[1] + 1 === lo) last[1] = hi;
      else row.push([lo, hi, j]);
    }
    moves.push(row);
  }
  return { moves, accepting: subsets.map((subset) => subset.includes(end)) };
}

/** Equivalent states merged (Moore's refinement), the start kept as 0. */
function minimal({ moves, accepting }: Dfa, budget: Budget): Dfa {
  let block: number[] = accepting.map((a) => (a ? 1 : 0));
  const rowIn = (row: Dfa["moves"][number], of: number[]) => {
    // adjacent ranges into one block merged, so that equal states read equal
    const out: Array<[number, number, number]> = [];
    for (const [lo, hi, t] of row) {
      const b = of[t] ?? 0;
      const last = out[out.length - 1];
      if (last && last[2] === b && last[1] + 1 === lo) last[1] = hi;
      else out.push([lo, hi, b]);
    }
    return out;
  };
  let work = 0;
  for (;;) {
    const signatures = new Map<string, number>();
    const next = moves.map((row, s) => {
      work += row.length + 1;
      if (work > budget.work) throw new Unsupported("too much work");
      const signature = `${block[s]}|${rowIn(row, block).join(";")}`;
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
  const order = new Map<number, number>([[block[0] ?? 0, 0]]);
  for (const b of block) if (!order.has(b)) order.set(b, order.size);
  const renamed = block.map((b) => order.get(b) ?? 0);
  const merged: Dfa["moves"] = Array.from({ length: order.size }, () => []);
  const finals: boolean[] = Array.from({ length: order.size }, () => false);
  for (const [s, row] of moves.entries()) {
    const to = renamed[s] ?? 0;
    finals[to] = accepting[s] ?? false;
    merged[to] = rowIn(row, renamed);
  }
  return { moves: merged, accepting: finals };
}

/** JSON's escapes for the characters a JSON string cannot hold as they are. */
function jsonEscape(cp: number): string {
  if (cp === 0x22) return '\\"';
  if (cp === 0x5c) return "\\\\";
  return `\\u${cp.toString(16).padStart(4, "0")}`;
}

const MUST_ESCAPE: Ranges = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
];

const ASCII: Ranges = [[0, 0x7f]];
const NON_ASCII = intersect([[0x80, 0x10ffff]], UNIVERSE);
/**
 * Most non-ASCII code points a set may leave out and still be written as every non-ASCII one
 * (those few taken too): `.` leaves out U+2028-9, `\S` and `[^\s]` the 17 non-ASCII spaces.
 */
const MAX_LEFT_OUT = 64;
/** Most non-ASCII code points written one by one. */
const MAX_LISTED = 256;

/**
 * A set of code points as EBNF alternatives. XGrammar 0.1.27 reads only some non-ASCII classes
 * right: a range such as [é-ÿ] or [一-龥] takes raw bytes (ASCII controls among them), and a
 * negated class ignores the non-ASCII code points it leaves out. What it reads right: ASCII
 * classes, `[^\0-\x7f]` (any non-ASCII character), and literal characters. So a set's ASCII
 * part is a class, its non-ASCII part every non-ASCII character (where it leaves out at most
 * MAX_LEFT_OUT of them: those few are taken too) or its characters one by one; any other set
 * is not built. (XGrammar's own regex, the fallback, writes a raw quote inside a JSON string
 * for `\S`: a few non-ASCII characters too many is the lesser harm.)
 */
function alternativesOf(ranges: Ranges, context: Context): string[] {
  const out: string[] = [];
  let ascii = intersect(ranges, ASCII);
  if (context === "json-string") {
    for (const [lo, hi] of intersect(ascii, MUST_ESCAPE))
      for (let cp = lo; cp <= hi; cp++) out.push(ebnfText(jsonEscape(cp)));
    ascii = intersect(ascii, complement(MUST_ESCAPE));
  }
  if (ascii.length > 0) out.push(ebnfClass(ascii));
  const other = intersect(ranges, NON_ASCII);
  if (other.length === 0) return out;
  const missing = intersect(NON_ASCII, complement(other));
  if (missing.reduce((n, [lo, hi]) => n + hi - lo + 1, 0) <= MAX_LEFT_OUT) {
    out.push("[^\\0-\\x7f]");
    return out;
  }
  let count = 0;
  for (const [lo, hi] of other) count += hi - lo + 1;
  if (count > MAX_LISTED) throw new Unsupported("a large part of the non-ASCII code points");
  for (const [lo, hi] of other)
    for (let cp = lo; cp <= hi; cp++) out.push(`"${String.fromCodePoint(cp)}"`);
  return out;
}

function emit(dfa: Dfa, rule: string, context: Context): string {
  const live = liveStates(dfa);
  if (!live[0]) throw new Unsupported("matches nothing");
  // moves into states that can never accept are dropped (an empty class, `a[]|b`)
  const rows = dfa.moves.map((row) => row.filter(([, , t]) => live[t]));
  const into = new Array<number>(rows.length).fill(0);
  for (const row of rows) for (const [, , t] of row) into[t] = (into[t] ?? 0) + 1;
  // a chain: a state reached from one place, not accepting, with one single character out;
  // written inline as a literal, so that an enum's trie is not a rule per character
  const single = (state: number) => {
    const row = rows[state] ?? [];
    const move = row[0];
    return row.length === 1 && move && move[0] === move[1] && !dfa.accepting[state]
      ? move
      : undefined;
  };
  const chained = (state: number) =>
    state !== 0 && into[state] === 1 && single(state) !== undefined;
  const name = (state: number) => (state === 0 ? rule : `${rule}_${state}`);
  /** From `state`, the characters of its chain and the first state past it. */
  const follow = (state: number): [string, number] => {
    let text = "";
    let at = state;
    for (let move = single(at); chained(at) && move; move = single(at)) {
      text += String.fromCodePoint(move[0]);
      at = move[2];
    }
    return [text, at];
  };
  const rules: string[] = [];
  for (const [state, row] of rows.entries()) {
    if (!live[state] || chained(state)) continue;
    const byTarget = new Map<number, Ranges>();
    for (const [lo, hi, t] of row) byTarget.set(t, [...(byTarget.get(t) ?? []), [lo, hi]]);
    const alternatives = dfa.accepting[state] ? ['""'] : [];
    for (const [target, ranges] of byTarget) {
      const [text, next] = follow(target);
      const rest = text === "" ? "" : ` ${literalOf(text, context)}`;
      for (const first of alternativesOf(ranges, context))
        alternatives.push(`${first}${rest} ${name(next)}`);
    }
    rules.push(`${name(state)} ::= ${alternatives.join(" | ")}`);
  }
  return rules.join("\n");
}

/** The states from which an accepting state can be reached. */
function liveStates(dfa: Dfa): boolean[] {
  const live = dfa.accepting.map((a) => a);
  for (let changed = true; changed; ) {
    changed = false;
    for (const [state, row] of dfa.moves.entries())
      if (!live[state] && row.some(([, , t]) => live[t])) {
        live[state] = true;
        changed = true;
      }
  }
  return live;
}

/** Text as EBNF elements: each character in the form its context writes it. */
function literalOf(text: string, context: Context): string {
  return [...text]
    .map((ch) => {
      const cp = ch.codePointAt(0) ?? 0;
      const [first] = alternativesOf([[cp, cp]], context);
      return first ?? "";
    })
    .join(" ");
}

/** An ASCII code point as EBNF writes it: letters and digits as they are, the rest escaped. */
function ebnfCodePoint(cp: number): string {
  const ch = String.fromCodePoint(cp);
  // \u and four digits: XGrammar reads \x's hex digits on ("\x5fad" is one code point)
  return /[0-9A-Za-z]/.test(ch) ? ch : `\\u${cp.toString(16).padStart(4, "0")}`;
}

function ebnfClass(ranges: Ranges): string {
  return `[${ranges
    .map(([lo, hi]) =>
      lo === hi ? ebnfCodePoint(lo) : `${ebnfCodePoint(lo)}-${ebnfCodePoint(hi)}`,
    )
    .join("")}]`;
}

/** ASCII text as an EBNF string literal, every character but letters and digits escaped. */
function ebnfText(text: string): string {
  return `"${[...text].map((ch) => ebnfCodePoint(ch.codePointAt(0) ?? 0)).join("")}"`;
}
