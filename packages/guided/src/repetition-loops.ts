/**
 * XGrammar writes a counted repetition out up to this many copies and keeps a larger one as
 * a loop; such a loop inside further counted repetitions compiles in a time that grows
 * steeply with their counts (measured on its thread: `((a|b){0,200}){0,2}` 17 ms, `{0,40}`
 * 1.5 s, `((a|b){0,130}){0,130}` past 6 s and `{0,158}` past 30 s, while `((a|b){0,120}){0,120}`
 * took 16 ms and `((a|b){0,40}){0,200}` 6 ms): a 112-byte grammar held a model's grammar
 * thread for its whole compile budget, every other guided request of that model behind it.
 */
export const MAX_UNROLLED_COUNT = 128;
/** The most copies counted repetitions around such a loop may make of it, together. */
export const MAX_COPIES_OF_A_LOOP = 8;

/**
 * The copies made of the innermost repetition past MAX_UNROLLED_COUNT in an item once `count`
 * applies to it: `inner` is the item's own (0: it holds none), and a repetition past the
 * count is a loop of its own (1).
 */
export function loopCopies(inner: number, count: number): number {
  if (inner > 0) return inner * Math.max(1, count);
  return count > MAX_UNROLLED_COUNT ? 1 : 0;
}

/** The budget's words for a spec past MAX_COPIES_OF_A_LOOP. */
export function loopCopiesProblem(what: string, copies: number): string {
  return `${what} repeats a counted repetition of more than ${MAX_UNROLLED_COUNT} inside others that copy it ${copies > 1e6 ? "more than a million" : copies} times, more than ${MAX_COPIES_OF_A_LOOP} (it would not compile in time): count the inner part at most ${MAX_UNROLLED_COUNT}, or the outer ones less`;
}
