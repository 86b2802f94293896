import { type Bound, numberRange } from "./number-range.js";
import type { Spelling } from "./spelling.js";

/** Most multiples a `multipleOf` range is spelled out as. */
export const MAX_SPELLED_MULTIPLES = 1_024;

/** The keywords of a numeric bound, and the one of a step. */
export const BOUND_KEYWORDS = [
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
];

/**
 * How a number's keywords reach XGrammar, whose 0.1.27 converter writes most bounds loosely
 * (0..120 as `1[0-2][0-9]`, which takes 129; a number's maximum 3 takes 3.5): bounds become an
 * exact spelling of the range (number-range.ts) that the grammar thread writes in place of
 * XGrammar's; an integer `multipleOf` within bounds is spelled out as its multiples; a range
 * with no number in it, and a `multipleOf` that cannot be spelled, are refused.
 */
export type BoundsPlan =
  | { kind: "spell"; values: number[] }
  | { kind: "range"; spelling: Spelling }
  | { kind: "refuse"; keyword: string; why: string };

/** The plan for `node`'s numeric keywords (its type given), or undefined where it has none. */
export function boundsPlan(node: Record<string, unknown>, type: unknown): BoundsPlan | undefined {
  if (!BOUND_KEYWORDS.some((k) => typeof node[k] === "number")) return undefined;
  const types = Array.isArray(type) ? type : [type];
  const integer = types.includes("integer") && !types.includes("number");
  const low = tighter(node.minimum, node.exclusiveMinimum, 1);
  const high = tighter(node.maximum, node.exclusiveMaximum, -1);
  if (typeof node.multipleOf === "number") return multiples(node.multipleOf, low, high, integer);
  const spelling = numberRange(low, high, integer);
  if (spelling.length > 0) return { kind: "range", spelling };
  return {
    kind: "refuse",
    keyword: BOUND_KEYWORDS.find((k) => k in node) ?? "minimum",
    why: `no ${integer ? "integer" : "number"} of at most 15 digits lies within these bounds`,
  };
}

/** An integer `multipleOf` as its multiples within the bounds, where they are few enough. */
function multiples(
  step: number,
  low: Bound | undefined,
  high: Bound | undefined,
  integer: boolean,
): BoundsPlan {
  const refuse = (why: string): BoundsPlan => ({ kind: "refuse", keyword: "multipleOf", why });
  if (!integer || !Number.isInteger(step) || step <= 0)
    return refuse("multipleOf is supported on integers, as a positive integer step");
  if (!low || !high)
    return refuse("multipleOf needs a minimum and a maximum (its multiples are spelled out)");
  const first = Math.ceil((low.open ? Math.floor(low.value) + 1 : low.value) / step) * step;
  const last = Math.floor((high.open ? Math.ceil(high.value) - 1 : high.value) / step) * step;
  const count = Math.floor((last - first) / step) + 1;
  if (count <= 0) return refuse("no multiple lies within these bounds");
  if (count > MAX_SPELLED_MULTIPLES)
    return refuse(
      `multipleOf within these bounds has ${count} multiples, more than ${MAX_SPELLED_MULTIPLES}`,
    );
  return { kind: "spell", values: Array.from({ length: count }, (_, i) => first + i * step) };
}

/** The tighter of an inclusive and an exclusive bound (`side` +1 for a lower, -1 for an upper). */
function tighter(inclusive: unknown, exclusive: unknown, side: 1 | -1): Bound | undefined {
  // draft 4's exclusiveMinimum/-Maximum: a boolean that makes the bound beside it exclusive
  if (typeof exclusive === "boolean")
    return typeof inclusive === "number" ? { value: inclusive, open: exclusive } : undefined;
  const closed = typeof inclusive === "number" ? inclusive : undefined;
  const open = typeof exclusive === "number" ? exclusive : undefined;
  if (closed === undefined) return open === undefined ? undefined : { value: open, open: true };
  if (open === undefined) return { value: closed, open: false };
  // an exclusive bound at the same value is the tighter one
  const openWins = side > 0 ? open >= closed : open <= closed;
  return openWins ? { value: open, open: true } : { value: closed, open: false };
}
