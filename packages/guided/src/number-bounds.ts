/**
 * A bound this far from zero (zod's safe-integer ones) is written as 15 digits at most, a
 * bound XGrammar spells exactly and a model's integer never needs to pass.
 */
export const FAR_BOUND = 1e15;
export const FIFTEEN_NINES = 999_999_999_999_999;
/** Most integers a bounded range is spelled out as. */
export const MAX_SPELLED_RANGE = 1_024;

/** The keywords of a numeric bound. */
export const BOUND_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/**
 * How a schema's numeric bounds reach XGrammar, whose 0.1.27 converter writes most bounds
 * loosely (0..120 as `1[0-2][0-9]`, which takes 129; a number's maximum 3 takes 3.5; a
 * negative minimum as a bare "-"). Exact are: a small integer range spelled out as its values,
 * and integer bounds that are a non-negative minimum, a minimum of -(10^k - 1) and a maximum of
 * 10^k - 1 (digit counts), far bounds taken as 15 digits. Anything else is refused.
 */
export type BoundsPlan =
  | { kind: "spell"; values: number[] }
  | { kind: "bounds"; minimum?: number; maximum?: number }
  | { kind: "refuse"; why: string };

export function boundsPlan(node: Record<string, unknown>, type: unknown): BoundsPlan | undefined {
  if (!BOUND_KEYWORDS.some((k) => typeof node[k] === "number")) return undefined;
  const integer = type === "integer";
  const low = bound(node.minimum, node.exclusiveMinimum, 1, integer);
  const high = bound(node.maximum, node.exclusiveMaximum, -1, integer);
  if (!integer) {
    const far = (v: unknown) =>
      v === undefined || (typeof v === "number" && Math.abs(v) >= FAR_BOUND);
    const zeroMinimum = node.minimum === 0 && node.exclusiveMinimum === undefined;
    if (BOUND_KEYWORDS.every((k) => far(node[k]) || (k === "minimum" && zeroMinimum)))
      return { kind: "bounds", ...(zeroMinimum ? { minimum: 0 } : {}) };
    return {
      kind: "refuse",
      why: "bounds on a number other than a minimum of 0 are not supported (XGrammar writes them loosely): use type integer, or drop the bound",
    };
  }
  if (low !== undefined && high !== undefined) {
    if (high < low) return { kind: "refuse", why: "no integer lies within these bounds" };
    if (high - low < MAX_SPELLED_RANGE)
      return { kind: "spell", values: Array.from({ length: high - low + 1 }, (_, i) => low + i) };
  }
  const digits = (n: number) => n > 0 && Number.isInteger(Math.log10(n + 1));
  if ((low === undefined || low >= 0 || digits(-low)) && (high === undefined || digits(high)))
    return {
      kind: "bounds",
      ...(low === undefined ? {} : { minimum: low }),
      ...(high === undefined ? {} : { maximum: high }),
    };
  return {
    kind: "refuse",
    why: `an integer range must hold at most ${MAX_SPELLED_RANGE} values, or be bounded by digit counts (a minimum of 0 or more, or -9, -99, ...; a maximum of 9, 99, ...): XGrammar writes other bounds loosely`,
  };
}

/**
 * The inclusive bound of `inclusive` / `exclusive` (`step` +1 for a lower, -1 for an upper),
 * or undefined where none is given; one past FAR_BOUND is taken as 15 digits.
 */
function bound(
  inclusive: unknown,
  exclusive: unknown,
  step: 1 | -1,
  integer: boolean,
): number | undefined {
  const found: number[] = [];
  for (const [value, open] of [
    [inclusive, false],
    [exclusive, true],
  ] as const) {
    if (typeof value !== "number") continue;
    if (Math.abs(value) >= FAR_BOUND) found.push(Math.sign(value) * FIFTEEN_NINES);
    else if (!integer) found.push(value);
    else if (step > 0) found.push(open ? Math.floor(value) + 1 : Math.ceil(value));
    else found.push(open ? Math.ceil(value) - 1 : Math.floor(value));
  }
  if (found.length === 0) return undefined;
  return step > 0 ? Math.max(...found) : Math.min(...found);
}
