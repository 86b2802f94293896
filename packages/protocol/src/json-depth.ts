/**
 * Deepest nesting of a free-form JSON value a request carries (a tool's parameters, a chat
 * template's arguments): a template renders it and JSON.stringify writes it, both recursively,
 * and 5,000 levels in a 30 KB body overflowed the stack. Ordinary values nest a few.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether `value` nests at most `max` levels of arrays and objects, walked without recursion;
 * and, given `maxEntries`, holds at most that many entries (array elements and object values)
 * in all, the walk stopping once past it.
 */
export function nestsWithin(
  value: unknown,
  max = MAX_JSON_DEPTH,
  maxEntries = Number.POSITIVE_INFINITY,
): boolean {
  let entries = 0;
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    if (typeof top.value !== "object" || top.value === null) continue;
    if (top.depth >= max) return false;
    const inner = Object.values(top.value);
    entries += inner.length;
    if (entries > maxEntries) return false;
    for (const v of inner)
      if (typeof v === "object" && v !== null) stack.push({ value: v, depth: top.depth + 1 });
  }
  return true;
}
