import { type AST, RegExpParser } from "@eslint-community/regexpp";

/**
 * A regular expression as a minimal deterministic automaton in EBNF, for XGrammar: 0.1.27
 * matches a pattern whose alternatives overlap loosely (`[0-9]|[1-9][0-9]{4}|100000|-[1-9]`
 * let `10000` go on with 1..9), as it did numbers and enums (spelling.ts). Parsed by regexpp
 * (ESLint's ECMAScript parser), built as a Thompson automaton over code-point ranges, made
 * deterministic by subsets and minimal by Moore's refinement, written one rule per state.
 * Where a pattern uses what this does not build (lookaround, backreferences, \b, \p{...}, an
 * anchor inside), or its automaton passes its budget, the answer is undefined and XGrammar's
 * own regex is used.
 */

/** Sorted, disjoint, inclusive code-point ranges. */
type Ranges = Array<[number, number]>;

/** Most states a pattern's deterministic automaton may have. */
export const MAX_REGEX_STATES = 4_000;
/** Most states an automaton may have to be made minimal. */
const MAX_MINIMIZED = 400;
/** Most states its nondeterministic automaton may have (about 3 per written-out atom). */
const MAX_NFA_STATES = 4_000;
/** Most automaton states visited while building one (subset sizes summed): a time budget. */
const MAX_REGEX_WORK = 400_000;

/** Every code point a JSON text can hold (no lone surrogates). */
const UNIVERSE: Ranges = [
  [0, 0xd7ff],
  [0xe000, 0x10ffff],
];
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

class Unsupported extends Error {}

/** Where the pattern's text is written: as it is, or inside a JSON string (escaped). */
export type RegexContext = "raw" | "json-string";

const built = new Map<string, string | null>();
const MAX_BUILT = 128;

/**
 * The pattern as EBNF rules, `rule` the first: the text matched whole (`raw`), or a JSON string
 * whose value it matches, quotes included (`json-string`); undefined where it cannot be built.
 */
export function regexEbnf(
  pattern: string,
  rule: string,
  context: RegexContext,
): string | undefined {
  const key = `${context}\u0000${pattern}`;
  let rules = built.get(key);
  if (rules === undefined) {
    rules = build(pattern, context) ?? null;
    if (built.size >= MAX_BUILT) built.delete(built.keys().next().value ?? "");
    built.set(key, rules);
  }
  return rules === null ? undefined : rules.replaceAll(PLACEHOLDER, rule);
}

const PLACEHOLDER = "ferry_regex_rule";

function build(pattern: string, context: RegexContext): string | undefined {
  let ast: AST.Pattern;
  try {
    ast = new RegExpParser({ ecmaVersion: 2024 }).parsePattern(pattern, 0, pattern.length, {
      unicode: true,
    });
  } catch {
    return undefined;
  }
  try {
    const nfa = new Nfa();
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
    // Moore's refinement takes a pass per state on a long chain: past a few hundred states
    // the automaton is written as it is (deterministic, if not the smallest)
    const found = deterministic(nfa, start, end);
    const dfa = found.moves.length <= MAX_MINIMIZED ? minimal(found) : found;
    const body = emit(dfa, context === "json-string" ? `${PLACEHOLDER}_s` : PLACEHOLDER, context);
    return context === "json-string"
      ? `${PLACEHOLDER} ::= "\\"" ${PLACEHOLDER}_s "\\""\n${body}`
      : body;
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
}

/** A nondeterministic automaton: edges on code-point ranges, and skips (empty moves). */
class Nfa {
  readonly edges: Array<Array<[Ranges, number]>> = [];
  readonly skips: number[][] = [];

  state(): number {
    if (this.edges.length >= MAX_NFA_STATES) throw new Unsupported("too many states");
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

function normalize(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(ranges: Ranges): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (const [lo, hi] of normalize(ranges)) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= 0x10ffff) out.push([next, 0x10ffff]);
  return intersect(out, UNIVERSE);
}

function intersect(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  for (const [alo, ahi] of a)
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  return normalize(out);
}

function contains(ranges: Ranges, cp: number): boolean {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = ranges[mid] as [number, number];
    if (cp < a) hi = mid - 1;
    else if (cp > b) lo = mid + 1;
    else return true;
  }
  return false;
}

/** A deterministic automaton: per state, its moves as [lo, hi, target], sorted by lo. */
interface Dfa {
  moves: Array<Array<[number, number, number]>>;
  accepting: boolean[];
}

function deterministic(nfa: Nfa, start: number, end: number): Dfa {
  let work = 0;
  const closure = (from: number[]): number[] => {
    const seen = new Set(from);
    const stack = [...from];
    for (let s = stack.pop(); s !== undefined; s = stack.pop())
      for (const t of nfa.skips[s] ?? [])
        if (!seen.has(t)) {
          seen.add(t);
          stack.push(t);
          if (++work > MAX_REGEX_WORK) throw new Unsupported("too much work");
        }
    work += from.length;
    return [...seen].sort((a, b) => a - b);
  };
  const subsets = [closure([start])];
  const index = new Map([[subsets[0]?.join(","), 0]]);
  const moves: Dfa["moves"] = [];
  for (let i = 0; i < subsets.length; i++) {
    if (subsets.length > MAX_REGEX_STATES) throw new Unsupported("too many states");
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
function minimal({ moves, accepting }: Dfa): Dfa {
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
  for (;;) {
    const signatures = new Map<string, number>();
    const next = moves.map((row, s) => {
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
/** Non-ASCII code points a set may leave out and still be written as every non-ASCII one. */
const LINE_SEPARATORS: Ranges = [[0x2028, 0x2029]];
/** Most non-ASCII code points written one by one. */
const MAX_LISTED = 256;

/**
 * A set of code points as EBNF alternatives. XGrammar 0.1.27 reads only some non-ASCII classes
 * right: a range such as [é-ÿ] or [一-龥] takes raw bytes (ASCII controls among them), and a
 * negated class ignores the non-ASCII code points it leaves out. What it reads right: ASCII
 * classes, `[^\0-\x7f]` (any non-ASCII character), and literal characters. So a set's ASCII
 * part is a class, its non-ASCII part every non-ASCII character (where it leaves out at most
 * U+2028 and U+2029, as `.` does: those two are taken too) or its characters one by one; any
 * other set is not built.
 */
function alternativesOf(ranges: Ranges, context: RegexContext): string[] {
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
  if (intersect(missing, complement(LINE_SEPARATORS)).length === 0) {
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

function emit(dfa: Dfa, rule: string, context: RegexContext): string {
  const name = (state: number) => (state === 0 ? rule : `${rule}_${state}`);
  const rules: string[] = [];
  for (const [state, row] of dfa.moves.entries()) {
    const byTarget = new Map<number, Ranges>();
    for (const [lo, hi, t] of row) byTarget.set(t, [...(byTarget.get(t) ?? []), [lo, hi]]);
    const alternatives = dfa.accepting[state] ? ['""'] : [];
    for (const [target, ranges] of byTarget)
      for (const first of alternativesOf(ranges, context))
        alternatives.push(`${first} ${name(target)}`);
    rules.push(`${name(state)} ::= ${alternatives.join(" | ")}`);
  }
  return rules.join("\n");
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
