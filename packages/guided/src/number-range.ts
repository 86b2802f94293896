import type { Atom, Spelling } from "./spelling.js";

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
  if ("min" in atom) return atom.max;
  return 1;
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
