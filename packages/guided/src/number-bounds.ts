/** A bound this far from zero binds nothing a model writes (zod's safe-integer bounds): dropped. */
export const FAR_BOUND = 1e15;
/** Most integers a bounded range is spelled out as. */
export const MAX_SPELLED_RANGE = 1_024;

/** The keywords of a numeric bound. */
export const BOUND_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/**
 * How a schema's numeric bounds reach XGrammar, whose 0.1.27 converter writes most bounds
 * loosely (0..120 as `1[0-2][0-9]`, which takes 129; a number's maximum 3 takes 3.5; a
 * negative minimum as a bare "-"). Exact are: a small integer range spelled out as its values,
 * and a non-negative integer lower bound alone. Anything else is refused, not approximated.
 */
export type BoundsPlan =
  | { kind: "drop" }
  | { kind: "spell"; values: number[] }
  | { kind: "keep-minimum"; minimum: number }
  | { kind: "refuse"; why: string };

export function boundsPlan(node: Record<string, unknown>, type: unknown): BoundsPlan | undefined {
  if (!BOUND_KEYWORDS.some((k) => typeof node[k] === "number")) return undefined;
  const integer = type === "integer";
  const low = bound(node.minimum, node.exclusiveMinimum, 1, integer);
  const high = bound(node.maximum, node.exclusiveMaximum, -1, integer);
  if (low === undefined && high === undefined) return { kind: "drop" };
  if (!integer)
    return {
      kind: "refuse",
      why: "bounds on a number are not supported (XGrammar writes them loosely): use type integer, or drop the bound",
    };
  if (low !== undefined && high !== undefined) {
    if (high < low) return { kind: "refuse", why: "no integer lies within these bounds" };
    if (high - low < MAX_SPELLED_RANGE)
      return { kind: "spell", values: Array.from({ length: high - low + 1 }, (_, i) => low + i) };
  }
  if (low !== undefined && low >= 0 && high === undefined)
    return { kind: "keep-minimum", minimum: low };
  return {
    kind: "refuse",
    why: `an integer range must hold at most ${MAX_SPELLED_RANGE} values, or have a non-negative minimum and no maximum (XGrammar writes other bounds loosely)`,
  };
}

/**
 * The inclusive bound of `inclusive` / `exclusive` (`step` +1 for a lower, -1 for an upper),
 * or undefined where none binds (absent, or past FAR_BOUND).
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
    if (typeof value !== "number" || Math.abs(value) >= FAR_BOUND) continue;
    if (!integer) found.push(value);
    else if (step > 0) found.push(open ? Math.floor(value) + 1 : Math.ceil(value));
    else found.push(open ? Math.ceil(value) - 1 : Math.floor(value));
  }
  if (found.length === 0) return undefined;
  return step > 0 ? Math.max(...found) : Math.min(...found);
}
