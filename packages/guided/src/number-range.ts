/**
 * The exact spelling of a bounded number: every JSON number (no exponent, no leading zeros, no
 * "-0") whose value lies within the bounds, and no other, as EBNF for XGrammar (whose 0.1.27
 * converter writes bounds loosely: 0..120 as `1[0-2][0-9]`, a number's maximum 3 taking 3.5).
 *
 * Built the way range-to-regex builders are: the integer part split by digit count into runs of
 * digit classes, and at an integer part equal to a bound, the fraction compared digit by digit
 * against the bound's. At most 15 significant digits are written (an integer part of 15 digits
 * at most, fewer fraction digits beside a longer integer part), so that every number written
 * reads back in a double as the decimal it is, on the right side of an exclusive bound.
 */

/** Significant digits a written number may have: every such decimal is exact enough in a double. */
export const SIGNIFICANT_DIGITS = 15;

/** One bound: its value and whether it is exclusive. */
export interface Bound {
  value: number;
  open: boolean;
}

/** A piece of a spelling: a literal, one digit within a class, or a run of any digits. */
export type Atom =
  | { literal: string }
  | { from: number; to: number }
  | { min: number; max: number };
/** Alternatives, each a sequence of atoms. */
export type Spelling = Atom[][];

/** A non-negative decimal: its integer part and its fraction's digits (no trailing zeros). */
interface Decimal {
  int: bigint;
  frac: string;
}

const LARGEST = 10n ** BigInt(SIGNIFICANT_DIGITS) - 1n;

/**
 * The numbers (integers only when `integer`) within `low` and `high` (either may be absent),
 * or an empty spelling where none lies within them and 15 digits.
 */
export function numberRange(
  low: Bound | undefined,
  high: Bound | undefined,
  integer: boolean,
): Spelling {
  const out: Spelling = [];
  const zero: Bound = { value: 0, open: false };
  // the non-negative numbers: within [max(low, 0), high]
  if (high === undefined || high.value > 0 || (high.value === 0 && !high.open)) {
    const from = low === undefined || low.value < 0 ? zero : low;
    out.push(...magnitudes(from, high, integer));
  }
  // the negative ones, as "-" and a magnitude within (max(-high, 0), -low]: never "-0"
  if (low === undefined || low.value < 0) {
    const from: Bound =
      high === undefined || high.value >= 0
        ? { value: 0, open: true }
        : { value: -high.value, open: high.open };
    const to = low === undefined ? undefined : { value: -low.value, open: low.open };
    for (const alt of magnitudes(from, to, integer)) out.push([{ literal: "-" }, ...alt]);
  }
  return out;
}

/** Non-negative numbers from `low` up to `high` (none: 15 digits). */
function magnitudes(low: Bound, high: Bound | undefined, integer: boolean): Spelling {
  const a = decimal(low.value);
  const b = high === undefined || high.value > Number(LARGEST) ? undefined : decimal(high.value);
  if (a.int > LARGEST) return [];
  const top = b?.int ?? LARGEST;
  if (b !== undefined && high !== undefined) {
    const order = compare(a, b);
    if (order > 0 || (order === 0 && (low.open || high.open))) return [];
  }
  const out: Spelling = [];
  const room = (int: bigint) => SIGNIFICANT_DIGITS - (int === 0n ? 0 : String(int).length);
  if (integer) {
    // the integer part is the number: a bound's fraction moves it to the next integer inside
    const first = a.frac === "" && !low.open ? a.int : a.int + 1n;
    const last =
      b === undefined ? LARGEST : b.frac !== "" || !(high?.open ?? false) ? b.int : b.int - 1n;
    return integers(first, last);
  }
  const lowFrac = { frac: a.frac, open: low.open };
  const highFrac = high && b ? { frac: b.frac, open: high.open } : undefined;
  if (a.int === top) {
    const fraction = fractions(lowFrac, highFrac, room(a.int));
    for (const f of fraction) out.push([{ literal: String(a.int) }, ...f]);
    return out;
  }
  for (const f of fractions(lowFrac, undefined, room(a.int)))
    out.push([{ literal: String(a.int) }, ...f]);
  for (const piece of integers(a.int + 1n, top - (highFrac ? 1n : 0n))) {
    const digits = piece.reduce((n, atom) => n + atomLength(atom), 0);
    for (const f of fractions(undefined, undefined, SIGNIFICANT_DIGITS - digits))
      out.push([...piece, ...f]);
  }
  if (highFrac)
    for (const f of fractions(undefined, highFrac, room(top)))
      out.push([{ literal: String(top) }, ...f]);
  return out;
}

/** Digits an atom of an integer part spells (each of its pieces has one length). */
function atomLength(atom: Atom): number {
  if ("literal" in atom) return atom.literal.length;
  if ("from" in atom) return 1;
  return atom.max;
}

/** The integers first..last, in pieces of one digit count each, no leading zeros. */
function integers(first: bigint, last: bigint): Spelling {
  const out: Spelling = [];
  if (first > last) return out;
  for (let length = String(first).length; length <= String(last).length; length++) {
    const smallest = length === 1 ? 0n : 10n ** BigInt(length - 1);
    const largest = 10n ** BigInt(length) - 1n;
    const from = first > smallest ? first : smallest;
    const to = last < largest ? last : largest;
    if (from <= to) out.push(...sameLength(String(from), String(to)));
  }
  return out;
}

/** Digit strings of one length from `a` to `b` (equal lengths, a <= b). */
function sameLength(a: string, b: string): Spelling {
  if (a.length === 0) return [[]];
  const [a0, b0] = [Number(a[0]), Number(b[0])];
  const [aRest, bRest] = [a.slice(1), b.slice(1)];
  if (a0 === b0) return sameLength(aRest, bRest).map((alt) => [digit(a0, a0), ...alt]);
  const anyRest = (n: number): Atom[] => (n === 0 ? [] : [{ min: n, max: n }]);
  const out: Spelling = [];
  const allLow = /^0*$/.test(aRest);
  const allHigh = /^9*$/.test(bRest);
  const innerFrom = allLow ? a0 : a0 + 1;
  const innerTo = allHigh ? b0 : b0 - 1;
  if (!allLow)
    out.push(...sameLength(aRest, "9".repeat(aRest.length)).map((alt) => [digit(a0, a0), ...alt]));
  if (innerFrom <= innerTo) out.push([digit(innerFrom, innerTo), ...anyRest(aRest.length)]);
  if (!allHigh)
    out.push(...sameLength("0".repeat(bRest.length), bRest).map((alt) => [digit(b0, b0), ...alt]));
  return out;
}

/**
 * A fraction's spellings: "" (none) or "." and 1..room digits, its value 0.F within the bounds
 * given (each the fraction digits of a bound at the same integer part).
 */
function fractions(
  low: { frac: string; open: boolean } | undefined,
  high: { frac: string; open: boolean } | undefined,
  room: number,
): Spelling {
  const out: Spelling = [];
  for (const alt of fractionDigits(low, high, Math.max(room, 0)))
    out.push(alt.length === 0 ? [] : [{ literal: "." }, ...alt]);
  return out;
}

/**
 * Digit strings F of at most `room` digits (the empty one included) with 0.F within the bounds,
 * compared first digit first: a digit above the low bound's frees the rest from it, one equal
 * to it carries the rest of the bound down.
 */
function fractionDigits(
  lowBound: { frac: string; open: boolean } | undefined,
  high: { frac: string; open: boolean } | undefined,
  room: number,
): Spelling {
  // a closed bound of 0 bounds nothing
  const low = lowBound?.frac === "" && !lowBound.open ? undefined : lowBound;
  const out: Spelling = [];
  // F empty is the value 0: at least the low bound only if that bound is a closed 0
  const emptyFits =
    (low === undefined || (low.frac === "" && !low.open)) &&
    (high === undefined || high.frac !== "" || !high.open);
  if (emptyFits) out.push([]);
  if (room === 0) return out;
  const lowDigit = low ? Number(low.frac[0] ?? "0") : 0;
  const highDigit = high ? Number(high.frac[0] ?? "0") : 9;
  const rest = (bound: { frac: string; open: boolean }) => ({
    frac: bound.frac.slice(1),
    open: bound.open,
  });
  const any = (first: number, last: number) => {
    if (first <= last)
      out.push([digit(first, last), ...(room > 1 ? [{ min: 0, max: room - 1 }] : [])]);
  };
  if (low && high && lowDigit === highDigit) {
    for (const alt of fractionDigits(rest(low), rest(high), room - 1))
      out.push([digit(lowDigit, lowDigit), ...alt]);
    return out;
  }
  const freeFrom = low ? lowDigit + 1 : 0;
  const freeTo = high ? highDigit - 1 : 9;
  if (low)
    for (const alt of fractionDigits(rest(low), undefined, room - 1))
      out.push([digit(lowDigit, lowDigit), ...alt]);
  any(freeFrom, freeTo);
  if (high && highDigit >= freeFrom)
    for (const alt of fractionDigits(undefined, rest(high), room - 1))
      out.push([digit(highDigit, highDigit), ...alt]);
  // a low bound's digit 0 with no high bound: F of only zeros were left to the recursion
  return dedupe(out);
}

/** -1, 0 or 1 as `a` is below, equal to or above `b`. */
function compare(a: Decimal, b: Decimal): number {
  if (a.int !== b.int) return a.int < b.int ? -1 : 1;
  const width = Math.max(a.frac.length, b.frac.length);
  const [x, y] = [a.frac.padEnd(width, "0"), b.frac.padEnd(width, "0")];
  return x === y ? 0 : x < y ? -1 : 1;
}

function digit(from: number, to: number): Atom {
  return from === to ? { literal: String(from) } : { from, to };
}

function dedupe(spelling: Spelling): Spelling {
  const seen = new Set<string>();
  return spelling.filter((alt) => {
    const key = JSON.stringify(alt);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A finite non-negative number as the decimal its shortest spelling says. */
function decimal(value: number): Decimal {
  const [mantissa = "0", exponentText = "0"] = Math.abs(value).toString().split("e");
  const exponent = Number(exponentText);
  const [whole = "0", fraction = ""] = mantissa.split(".");
  let digits = whole + fraction;
  let point = whole.length + exponent;
  if (point < 0) {
    digits = "0".repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += "0".repeat(point - digits.length);
  return {
    int: BigInt(digits.slice(0, point) || "0"),
    frac: digits.slice(point).replace(/0+$/, ""),
  };
}

/** What a number is spelled with: digits, the point and the sign. */
const SYMBOLS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ".", "-"];

/**
 * The spelling as EBNF rules (XGrammar's dialect), `rule` first: a minimal deterministic
 * automaton written as one rule per state, each alternative starting with its own characters.
 * XGrammar 0.1.27 matches the same language written as overlapping alternatives wrongly (it
 * took 681024 from `... | 6810[01][0-9] | 68102[0-3]`); a deterministic grammar leaves it
 * nothing to merge.
 */
export function spellingEbnf(spelling: Spelling, rule: string): string {
  if (spelling.length === 0) throw new Error("an empty numeric range has no spelling");
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

function characters(symbols: string[]): string {
  if (symbols.length === 1) return JSON.stringify(symbols[0]);
  return `[${symbols.map((s) => (s === "-" ? "\\-" : s)).join("")}]`;
}

interface Automaton {
  /** Per state, its move on each symbol it takes. */
  moves: Array<Map<string, number>>;
  accepting: boolean[];
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
  const edge = (from: number, symbols: ReadonlySet<string>) => {
    const to = state();
    edges[from]?.push([symbols, to]);
    return to;
  };
  const digits = new Set(SYMBOLS.slice(0, 10));
  const start = state();
  for (const alternative of spelling) {
    let at = state();
    skips[start]?.push(at);
    for (const atom of alternative) {
      if ("literal" in atom) for (const ch of atom.literal) at = edge(at, new Set([ch]));
      else if ("from" in atom) at = edge(at, new Set(SYMBOLS.slice(atom.from, atom.to + 1)));
      else {
        for (let i = 0; i < atom.min; i++) at = edge(at, digits);
        const end = state();
        for (let i = atom.min; i < atom.max; i++) {
          skips[at]?.push(end);
          at = edge(at, digits);
        }
        skips[at]?.push(end);
        at = end;
      }
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
    const row = new Map<string, number>();
    for (const symbol of SYMBOLS) {
      const next: number[] = [];
      for (const s of subsets[i] ?? [])
        for (const [set, t] of edges[s] ?? []) if (set.has(symbol)) next.push(t);
      if (next.length === 0) continue;
      const subset = closure(next);
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
      const signature = `${block[s]}|${SYMBOLS.map((sym) => block[row.get(sym) ?? -1] ?? "x").join(",")}`;
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
  const atom = (a: Atom) =>
    "literal" in a
      ? a.literal.replace(/[.-]/g, "\\$&")
      : "from" in a
        ? `[${a.from}-${a.to}]`
        : `[0-9]{${a.min},${a.max}}`;
  return new RegExp(`^(?:${spelling.map((alt) => alt.map(atom).join("")).join("|")})$`);
}
