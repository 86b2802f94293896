/**
 * Optional properties of objects that bound how many properties they hold (`minProperties`,
 * `maxProperties`), a spec's tools together: XGrammar compiles such an object in a time that
 * grows steeply with them (measured on its thread: 50 with minProperties 2 0.32 s, 100 1.8 s,
 * 130 5.4 s, 200 past 15 s), and a 6 KB schema held a model's grammar thread for its whole
 * compile budget (attack).
 */
export const MAX_PROPERTY_COUNTED_OPTIONALS = 64;

/**
 * The optional properties of an object whose minProperties or maxProperties constrains them
 * (0 when it names neither, or names bounds its properties meet whatever is chosen).
 */
export function countedOptionals(node: Record<string, unknown>): number {
  const { minProperties: min, maxProperties: max, properties } = node;
  if (min === undefined && max === undefined) return 0;
  const names =
    properties !== null && typeof properties === "object" ? Object.keys(properties) : [];
  const required = new Set(Array.isArray(node.required) ? node.required : []);
  const optional = names.filter((name) => !required.has(name)).length;
  const closed = node.additionalProperties === false && node.patternProperties === undefined;
  const minMet = typeof min !== "number" || min <= required.size;
  const maxMet = typeof max !== "number" || (closed && max >= names.length);
  return minMet && maxMet ? 0 : optional;
}
