/** Code-point sets as sorted ranges: what an automaton's moves and a regex's classes are. */

/** Sorted, disjoint, inclusive code-point ranges. */
export type Ranges = Array<[number, number]>;

/** Every code point a JSON text can hold (no lone surrogates). */
export const UNIVERSE: Ranges = [
  [0, 0xd7ff],
  [0xe000, 0x10ffff],
];

/** A nondeterministic automaton: edges on code-point ranges, and skips (empty moves). */
export function normalize(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

export function complement(ranges: Ranges): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (const [lo, hi] of normalize(ranges)) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= 0x10ffff) out.push([next, 0x10ffff]);
  return intersect(out, UNIVERSE);
}

export function intersect(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  for (const [alo, ahi] of a)
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  return normalize(out);
}

export function contains(ranges: Ranges, cp: number): boolean {
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
