/**
 * Deepest nesting of a free-form JSON value a request carries (a tool's parameters, a chat
 * template's arguments): a template renders it and JSON.stringify writes it, both recursively,
 * and 5,000 levels in a 30 KB body overflowed the stack. Ordinary values nest a few.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `value` nests at most `max` levels of arrays and objects, walked without recursion. */
export function nestsWithin(value: unknown, max = MAX_JSON_DEPTH): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    if (typeof top.value !== "object" || top.value === null) continue;
    if (top.depth >= max) return false;
    for (const inner of Object.values(top.value))
      if (typeof inner === "object" && inner !== null)
        stack.push({ value: inner, depth: top.depth + 1 });
  }
  return true;
}
