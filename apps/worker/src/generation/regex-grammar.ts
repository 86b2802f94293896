import type { ByteGrammar } from "./guide.js";
import { CONTINUATION, utf8Follows, utf8Lead } from "./utf8.js";

/**
 * A regular expression as a recogniser of whole texts over UTF-8 bytes, for guided decoding
 * (vLLM's `guided_regex`): `feed` takes the next byte and says whether some text that begins
 * so can still match the whole pattern; `complete` whether the text so far does. A Thompson
 * automaton over code points, simulated state set by state set (no backtracking, no blow-up).
 *
 * The syntax is the common core of JavaScript's and Python's: literals and escapes, `.`,
 * classes (`[a-z]`, `[^...]`, `\d \w \s` and their negations), groups (capturing or `(?:`),
 * `|`, and the quantifiers `* + ? {m} {m,} {m,n}` (lazy or not: a whole match is the same).
 * Anchors `^` at the start and `$` at the end are accepted (the match is whole anyway);
 * backreferences, lookaround and anchors elsewhere are refused with `RegexError`.
 */

export class RegexError extends Error {}

/** A text as a pattern that matches exactly it. */
export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/** Code point ranges, inclusive, sorted and disjoint. */
type Ranges = Array<[number, number]>;

const MAX_CODE_POINT = 0x10ffff;
/** Repetitions a bounded quantifier may unroll to (a{1000} is a thousand states). */
const MAX_REPEAT = 1000;
/** States an automaton may have at most. */
const MAX_STATES = 100_000;

type Node =
  | { kind: "set"; ranges: Ranges }
  | { kind: "seq"; items: Node[] }
  | { kind: "alt"; options: Node[] }
  | { kind: "repeat"; item: Node; min: number; max: number };

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: Ranges = [
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
];

function normalise(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of sorted) {
    const last = out.at(-1);
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(ranges: Ranges): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (const [lo, hi] of normalise(ranges)) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

/** Parses the syntax above into a tree. */
class Parser {
  private at = 0;
  private readonly chars: string[];

  constructor(pattern: string) {
    this.chars = [...pattern];
  }

  parse(): Node {
    if (this.chars[0] === "^") this.at++;
    const node = this.alternation();
    if (this.at < this.chars.length) throw new RegexError(`unexpected '${this.chars[this.at]}'`);
    return node;
  }

  /** The next few characters, as text: enough for a `{m,n}` or a `\u{...}` (not the whole rest). */
  private ahead(): string {
    return this.chars.slice(this.at, this.at + 24).join("");
  }

  private peek(): string | undefined {
    return this.chars[this.at];
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.peek() === "|") {
      this.at++;
      options.push(this.sequence());
    }
    return options.length === 1 ? (options[0] as Node) : { kind: "alt", options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || c === ")") break;
      if (c === "$") {
        this.at++;
        const end = this.peek();
        if (end !== undefined && end !== ")" && end !== "|")
          throw new RegexError("'$' is supported only at the end");
        continue;
      }
      items.push(this.quantified(this.atom()));
    }
    return { kind: "seq", items };
  }

  private quantified(item: Node): Node {
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number;
      if (c === "*") [min, max] = [0, Number.POSITIVE_INFINITY];
      else if (c === "+") [min, max] = [1, Number.POSITIVE_INFINITY];
      else if (c === "?") [min, max] = [0, 1];
      else if (c === "{") {
        const bounds = this.bounds();
        if (!bounds) return item;
        [min, max] = bounds;
      } else return item;
      if (c !== "{") this.at++;
      // a lazy or possessive mark changes which match is found, not whether one is
      if (this.peek() === "?" || this.peek() === "+") this.at++;
      if (min > MAX_REPEAT || (max !== Number.POSITIVE_INFINITY && max > MAX_REPEAT))
        throw new RegexError(`a repetition over ${MAX_REPEAT}`);
      item = { kind: "repeat", item, min, max };
    }
  }

  /** `{m}`, `{m,}`, `{m,n}` at the cursor (consumed), or undefined (a literal `{`). */
  private bounds(): [number, number] | undefined {
    const rest = this.ahead();
    const m = /^\{(\d+)(,(\d*))?\}/.exec(rest);
    if (!m) return undefined;
    this.at += [...m[0]].length;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === "" ? Number.POSITIVE_INFINITY : Number(m[3]);
    if (max < min) throw new RegexError(`bad repetition ${m[0]}`);
    return [min, max];
  }

  private atom(): Node {
    const c = this.chars[this.at++];
    if (c === "(") {
      if (this.peek() === "?") {
        if (this.chars[this.at + 1] !== ":")
          throw new RegexError("lookaround and named groups are not supported");
        this.at += 2;
      }
      const inner = this.alternation();
      if (this.chars[this.at++] !== ")") throw new RegexError("unclosed group");
      return inner;
    }
    if (c === "[") return { kind: "set", ranges: this.charClass() };
    if (c === ".") return { kind: "set", ranges: complement([[0x0a, 0x0a]]) };
    if (c === "\\") return { kind: "set", ranges: this.escape(false) };
    if (c === "*" || c === "+" || c === "?")
      throw new RegexError(`nothing to repeat before '${c}'`);
    if (c === "^") throw new RegexError("'^' is supported only at the start");
    if (c === undefined) throw new RegexError("unexpected end");
    const cp = c.codePointAt(0) ?? 0;
    return { kind: "set", ranges: [[cp, cp]] };
  }

  private charClass(): Ranges {
    const negated = this.peek() === "^";
    if (negated) this.at++;
    const ranges: Ranges = [];
    let first = true;
    for (;;) {
      const c = this.chars[this.at++];
      if (c === undefined) throw new RegexError("unclosed class");
      if (c === "]" && !first) break;
      first = false;
      let lo: Ranges;
      if (c === "\\") lo = this.escape(true);
      else {
        const cp = c.codePointAt(0) ?? 0;
        lo = [[cp, cp]];
      }
      // a range a-z (a '-' first, last or after a class escape is a literal)
      if (
        this.peek() === "-" &&
        this.chars[this.at + 1] !== "]" &&
        this.chars[this.at + 1] !== undefined &&
        lo.length === 1 &&
        lo[0]?.[0] === lo[0]?.[1]
      ) {
        this.at++;
        const d = this.chars[this.at++];
        const hi =
          d === "\\"
            ? this.escape(true)
            : [[d?.codePointAt(0) ?? 0, d?.codePointAt(0) ?? 0] as [number, number]];
        const from = lo[0]?.[0] ?? 0;
        const to = hi[0]?.[0] ?? 0;
        if (hi.length !== 1 || hi[0]?.[0] !== hi[0]?.[1] || to < from)
          throw new RegexError("bad range in a class");
        ranges.push([from, to]);
      } else ranges.push(...lo);
    }
    return negated ? complement(ranges) : normalise(ranges);
  }

  /** The set an escape names (the cursor after the backslash). */
  private escape(inClass: boolean): Ranges {
    const c = this.chars[this.at++];
    if (c === undefined) throw new RegexError("a pattern may not end with '\\'");
    const single = (cp: number): Ranges => [[cp, cp]];
    switch (c) {
      case "d":
        return DIGIT;
      case "D":
        return complement(DIGIT);
      case "w":
        return WORD;
      case "W":
        return complement(WORD);
      case "s":
        return SPACE;
      case "S":
        return complement(SPACE);
      case "n":
        return single(0x0a);
      case "r":
        return single(0x0d);
      case "t":
        return single(0x09);
      case "f":
        return single(0x0c);
      case "v":
        return single(0x0b);
      case "0":
        return single(0);
      case "x":
      case "u": {
        const rest = this.ahead();
        const m =
          c === "x"
            ? /^[0-9a-fA-F]{2}/.exec(rest)
            : /^([0-9a-fA-F]{4}|\{[0-9a-fA-F]{1,6}\})/.exec(rest);
        if (!m) throw new RegexError(`bad \\${c} escape`);
        this.at += m[0].length;
        return single(Number.parseInt(m[0].replace(/[{}]/g, ""), 16));
      }
      case "b":
        if (inClass) return single(0x08);
        throw new RegexError("word boundaries are not supported");
      default:
        if (/[0-9]/.test(c)) throw new RegexError("backreferences are not supported");
        if (/[A-Za-z]/.test(c)) throw new RegexError(`unknown escape \\${c}`);
        return single(c.codePointAt(0) ?? 0);
    }
  }
}

/** A state: its character edge (to `next`), or its empty edges. */
interface State {
  ranges?: Ranges;
  next?: number;
  empty: number[];
}

/** The automaton: states, the start, the accepting state. */
class Automaton {
  readonly states: State[] = [];
  readonly start: number;
  readonly accept: number;

  constructor(root: Node) {
    this.accept = this.add();
    this.start = this.build(root, this.accept);
  }

  private add(): number {
    if (this.states.length >= MAX_STATES) throw new RegexError("the pattern is too large");
    this.states.push({ empty: [] });
    return this.states.length - 1;
  }

  /** States for `node` leading to `out`; returns its entry. */
  private build(node: Node, out: number): number {
    switch (node.kind) {
      case "set": {
        const s = this.add();
        Object.assign(this.states[s] as State, { ranges: node.ranges, next: out });
        return s;
      }
      case "seq": {
        let entry = out;
        for (let i = node.items.length - 1; i >= 0; i--)
          entry = this.build(node.items[i] as Node, entry);
        return entry;
      }
      case "alt": {
        const s = this.add();
        (this.states[s] as State).empty = node.options.map((o) => this.build(o, out));
        return s;
      }
      case "repeat": {
        let entry = out;
        if (node.max === Number.POSITIVE_INFINITY) {
          // a loop: enter the item or leave
          const loop = this.add();
          const body = this.build(node.item, loop);
          (this.states[loop] as State).empty = [body, out];
          entry = loop;
        } else {
          // optional copies: each may leave straight to `out`
          for (let k = node.min; k < node.max; k++) {
            const s = this.add();
            (this.states[s] as State).empty = [this.build(node.item, entry), out];
            entry = s;
          }
        }
        for (let k = 0; k < node.min; k++) entry = this.build(node.item, entry);
        return entry;
      }
    }
  }

  /** `set` and every state its empty edges reach. */
  closure(set: Iterable<number>): number[] {
    const seen = new Set<number>();
    const stack = [...set];
    while (stack.length > 0) {
      const s = stack.pop() as number;
      if (seen.has(s)) continue;
      seen.add(s);
      for (const t of this.states[s]?.empty ?? []) stack.push(t);
    }
    return [...seen].sort((a, b) => a - b);
  }

  /**
   * The automaton run as a DFA built lazily: each set of states met is made once and
   * remembers where each ASCII character took it, so that a guide trying a vocabulary's
   * tokens (tens of thousands of bytes per step) looks steps up instead of simulating them.
   */
  private readonly sets = new Map<string, StateSet>();
  /** What the kept sets weigh (see `weightOf`). */
  weightKept = 0;

  get startSet(): StateSet {
    return this.setOf(this.closure([this.start]));
  }

  /** Where `cp` takes `from`; undefined when no state takes it. */
  step(from: StateSet, cp: number): StateSet | undefined {
    const known = cp < 0x80 ? from.ascii[cp] : undefined;
    if (known !== undefined) return known ?? undefined;
    const next: number[] = [];
    for (const s of from.states) {
      const state = this.states[s];
      if (state?.ranges && state.next !== undefined && contains(state.ranges, cp))
        next.push(state.next);
    }
    const to = next.length === 0 ? undefined : this.setOf(this.closure(next));
    // ASCII steps are kept (JSON's and most patterns' text); others are worked out each time
    // (only to a set that is kept: past the bound, nothing new is held on to)
    if (cp < 0x80 && (to === undefined || to.kept)) from.ascii[cp] = to ?? null;
    return to;
  }

  private setOf(states: number[]): StateSet {
    const key = states.join(",");
    let set = this.sets.get(key);
    if (!set) {
      set = {
        key,
        states,
        accepting: states.includes(this.accept),
        open: states.some((s) => this.states[s]?.ranges !== undefined),
        ascii: new Array(0x80),
        kept: weightKeptInAll + weightOf(states) <= MAX_WEIGHT_KEPT,
      };
      // past the bound, sets are made for the moment and forgotten (a pathological pattern
      // costs time, not memory)
      if (set.kept) {
        this.sets.set(key, set);
        this.weightKept += weightOf(states);
        weightKeptInAll += weightOf(states);
      }
    }
    return set;
  }
}

/** A state of the lazy DFA: a set of the automaton's states, closed under empty edges. */
interface StateSet {
  /** Its states, sorted, as text: equal keys, equal sets. */
  readonly key: string;
  readonly states: readonly number[];
  readonly accepting: boolean;
  /** Whether any state of the set takes a character (false: only the end may follow). */
  readonly open: boolean;
  /** Where each ASCII character met so far led (null: nowhere). */
  readonly ascii: Array<StateSet | null | undefined>;
  /** Whether the automaton keeps it (and so steps may lead to it). */
  readonly kept: boolean;
}

/**
 * What the sets kept by every automaton may weigh at most (~40 MB): a client's patterns cost
 * time past it, not memory.
 */
const MAX_WEIGHT_KEPT = 4_000_000;
let weightKeptInAll = 0;

/** A set's weight: its states (in its list and its key) and its steps' slots, ~8-10 bytes each. */
function weightOf(states: readonly number[]): number {
  return states.length + 0x80;
}

/** Code points a JSON string holds unescaped: all but `"`, a backslash and U+0000-U+001F. */
const JSON_SAFE: Ranges = [
  [0x20, 0x21],
  [0x23, 0x5b],
  [0x5d, MAX_CODE_POINT],
];

/**
 * `pattern`'s language less every text with a character a JSON string must escape, as a
 * pattern in this grammar's syntax (anchors dropped: the match is whole): the texts of JSON
 * strings whose content `pattern` matches, written without escapes. A pattern whose every
 * match needs such a character matches no JSON string this way, and is refused.
 */
export function jsonSafePattern(pattern: string): string {
  const node = restrict(new Parser(pattern).parse(), JSON_SAFE);
  if (!matchesSomething(node))
    throw new RegexError("the pattern matches only texts with characters JSON escapes");
  return sourceOf(node);
}

function restrict(node: Node, allowed: Ranges): Node {
  switch (node.kind) {
    case "set":
      return { kind: "set", ranges: intersect(node.ranges, allowed) };
    case "seq":
      return { kind: "seq", items: node.items.map((item) => restrict(item, allowed)) };
    case "alt":
      return { kind: "alt", options: node.options.map((option) => restrict(option, allowed)) };
    case "repeat":
      return { ...node, item: restrict(node.item, allowed) };
  }
}

function intersect(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  for (const [alo, ahi] of a)
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  return normalise(out);
}

/** Whether some text matches (a set with no characters matches none). */
function matchesSomething(node: Node): boolean {
  switch (node.kind) {
    case "set":
      return node.ranges.length > 0;
    case "seq":
      return node.items.every(matchesSomething);
    case "alt":
      return node.options.some(matchesSomething);
    case "repeat":
      return node.min === 0 || matchesSomething(node.item);
  }
}

/** A node as a pattern this parser reads back to the same node. */
function sourceOf(node: Node): string {
  const cp = (c: number) => `\\u{${c.toString(16)}}`;
  switch (node.kind) {
    case "set":
      return node.ranges.length === 0
        ? `[^${cp(0)}-${cp(MAX_CODE_POINT)}]`
        : `[${node.ranges.map(([lo, hi]) => (lo === hi ? cp(lo) : `${cp(lo)}-${cp(hi)}`)).join("")}]`;
    case "seq":
      return node.items.map(sourceOf).join("");
    case "alt":
      return `(?:${node.options.map(sourceOf).join("|")})`;
    case "repeat":
      return `(?:${sourceOf(node.item)}){${node.min},${node.max === Number.POSITIVE_INFINITY ? "" : node.max}}`;
  }
}

const automata = new Map<string, Automaton>();

function automatonOf(pattern: string): Automaton {
  let automaton = automata.get(pattern);
  if (!automaton) {
    const node = new Parser(pattern).parse();
    // a guide with no text to reach would leave a sequence nothing to draw
    if (!matchesSomething(node)) throw new RegexError("the pattern matches nothing");
    automaton = new Automaton(node);
    // a small cache: the same pattern is sent again and again by one client
    if (automata.size >= 64) {
      const [oldest, evicted] = automata.entries().next().value as [string, Automaton];
      automata.delete(oldest);
      weightKeptInAll -= evicted.weightKept;
    }
    automata.set(pattern, automaton);
  }
  return automaton;
}

export class RegexGrammar implements ByteGrammar {
  /** A UTF-8 character in progress: its bytes so far, and how many it has. */
  private pending: number[] = [];
  private expected = 0;

  constructor(
    pattern: string,
    private readonly automaton = automatonOf(pattern),
    private set = automaton.startSet,
  ) {}

  /** One pattern, one language: guides share what they learn about it. */
  get language(): object {
    return this.automaton;
  }

  get stateKey(): string {
    return this.pending.length === 0 ? this.set.key : `${this.set.key}|${this.pending.join(",")}`;
  }

  copy(): RegexGrammar {
    const c = new RegexGrammar("", this.automaton, this.set);
    if (this.pending.length > 0) c.pending = [...this.pending];
    c.expected = this.expected;
    return c;
  }

  /** Whether the text so far matches the whole pattern. */
  get complete(): boolean {
    return this.pending.length === 0 && this.set.accepting;
  }

  /** Whether any text may follow (false: only the end of text). */
  get open(): boolean {
    return this.set.open;
  }

  /** Takes the next byte; false (and the state is then spoilt) when no match goes on so. */
  feed(b: number): boolean {
    if (this.pending.length === 0) {
      if (b < 0x80) {
        // ASCII, the common case: no character to assemble
        const next = this.automaton.step(this.set, b);
        if (!next) return false;
        this.set = next;
        return true;
      }
      const lead = utf8Lead(b);
      if (!lead) return false;
      this.expected = lead.size;
    } else if (!utf8Follows(this.pending[0] ?? 0, this.pending.length, b)) return false;
    this.pending.push(b);
    if (this.pending.length < this.expected) {
      // part of a character: some character that begins so must be taken
      const [lo, hi] = codePointsBeginning(this.pending, this.expected);
      return this.set.states.some((s) => overlaps(this.automaton.states[s]?.ranges, lo, hi));
    }
    const cp = decode(this.pending);
    this.pending = [];
    const next = this.automaton.step(this.set, cp);
    if (!next) return false;
    this.set = next;
    return true;
  }
}

function contains(ranges: Ranges, cp: number): boolean {
  for (const [lo, hi] of ranges) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

function overlaps(ranges: Ranges | undefined, lo: number, hi: number): boolean {
  return (ranges ?? []).some(([a, b]) => a <= hi && b >= lo);
}

function decode(bytes: number[]): number {
  const [b0 = 0, ...rest] = bytes;
  const lead = bytes.length === 1 ? b0 : b0 & (0xff >> (bytes.length + 1));
  return rest.reduce((cp, b) => (cp << 6) | (b & 0x3f), lead);
}

/** The code points a (well-formed) UTF-8 character of `size` bytes that begins with `bytes` may be. */
function codePointsBeginning(bytes: number[], size: number): [number, number] {
  const fill = (end: 0 | 1) =>
    Array.from({ length: size }, (_, i) => {
      if (i < bytes.length) return bytes[i] ?? 0;
      const range = i === 1 ? (utf8Lead(bytes[0] ?? 0)?.second ?? CONTINUATION) : CONTINUATION;
      return range[end];
    });
  return [decode(fill(0)), Math.min(decode(fill(1)), MAX_CODE_POINT)];
}
