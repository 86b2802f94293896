import { loopCopies, loopCopiesProblem, MAX_COPIES_OF_A_LOOP } from "./repetition-loops.js";

/** Longest pattern taken, in characters (vLLM's guided_regex has none; a body limit is not one). */
export const MAX_PATTERN_LENGTH = 4_096;
/**
 * Most characters a pattern may stand for once counted repetitions are written out: XGrammar
 * expands `x{n,m}` into copies of `x`, so `(a{1000}){1000}` would be a million-element grammar.
 */
export const MAX_PATTERN_EXPANSION = 100_000;
/**
 * Deepest nesting of a pattern's groups: XGrammar's regex parser recurses on its WebAssembly
 * stack, and 2,000 nested groups (4,001 characters) trapped it.
 */
export const MAX_PATTERN_NESTING = 64;

/**
 * Why XGrammar's regular expressions cannot take `pattern`, or undefined when they can: its
 * length, JavaScript's own syntax, what its converter lacks (lookaround, backreferences), and
 * the size counted repetitions would write out. Read in one pass, without compiling anything.
 */
export function regexProblem(pattern: string): string | undefined {
  if (pattern.length > MAX_PATTERN_LENGTH)
    return `the pattern has ${pattern.length} characters, more than ${MAX_PATTERN_LENGTH}`;
  try {
    new RegExp(pattern, "u");
  } catch {
    try {
      new RegExp(pattern);
    } catch {
      return "not a valid regular expression";
    }
  }
  if (/\(\?<?[=!]/.test(pattern)) return "lookaround ((?=, (?!, (?<=, (?<!) is not supported";
  if (/\\[1-9]|\\k</.test(pattern)) return "backreferences are not supported";
  if (groupDepth(pattern) > MAX_PATTERN_NESTING)
    return `the pattern nests groups deeper than ${MAX_PATTERN_NESTING} levels`;
  const { size, loopCopies: copies } = expandedSize(pattern);
  if (size > MAX_PATTERN_EXPANSION)
    return `the pattern writes out to ${size > 1e15 ? "more than 10^15" : size} characters once its counted repetitions are expanded, more than ${MAX_PATTERN_EXPANSION}`;
  if (copies > MAX_COPIES_OF_A_LOOP) return loopCopiesProblem("the pattern", copies);
  return undefined;
}

/**
 * How many atoms `pattern` is once every `{n}` / `{n,m}` is written out: a group's size is the
 * sum of its items (the largest branch of an alternation), an item's size times its count;
 * and the most copies its counts make of a repetition XGrammar keeps a loop (`loopCopies`).
 */
function expandedSize(pattern: string): { size: number; loopCopies: number } {
  // each open group: the size of its finished branches (max) and of the branch being read
  const stack: Array<{ best: number; branch: number; copies: number }> = [
    { best: 0, branch: 0, copies: 0 },
  ];
  let last = 0; // size of the item just read, for a quantifier to multiply
  let lastCopies = 0; // the copies it makes of a loop (`loopCopies`)
  let copies = 0;
  for (let i = 0; i < pattern.length; i++) {
    const top = stack[stack.length - 1];
    if (!top) break;
    const ch = pattern[i];
    if (ch === "\\") {
      i++;
      last = 1;
      lastCopies = 0;
      top.branch += 1;
    } else if (ch === "[") {
      // a class is one atom: skip to its closing bracket
      for (i++; i < pattern.length && pattern[i] !== "]"; i++) if (pattern[i] === "\\") i++;
      last = 1;
      lastCopies = 0;
      top.branch += 1;
    } else if (ch === "(") {
      if (pattern[i + 1] === "?") i += pattern[i + 2] === ":" ? 2 : 1;
      stack.push({ best: 0, branch: 0, copies: 0 });
    } else if (ch === ")") {
      const done = stack.pop();
      const outer = stack[stack.length - 1];
      if (!done || !outer) return { size: Number.POSITIVE_INFINITY, loopCopies: 0 };
      last = Math.max(done.best, done.branch);
      lastCopies = done.copies;
      outer.branch += last;
      outer.copies = Math.max(outer.copies, lastCopies);
    } else if (ch === "|") {
      top.best = Math.max(top.best, top.branch);
      top.branch = 0;
    } else if (ch === "{") {
      const m = /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i));
      if (m) {
        const count = Math.max(Number(m[2] || m[1]), 1);
        top.branch += last * (count - 1);
        last *= count;
        lastCopies = loopCopies(lastCopies, count);
        top.copies = Math.max(top.copies, lastCopies);
        copies = Math.max(copies, lastCopies);
        i += m[0].length - 1;
      } else {
        last = 1;
        lastCopies = 0;
        top.branch += 1;
      }
    } else if (ch === "*" || ch === "+" || ch === "?") {
      // a quantifier's own size is its item's
    } else {
      last = 1;
      lastCopies = 0;
      top.branch += 1;
    }
  }
  const root = stack[0];
  return { size: root ? Math.max(root.best, root.branch) : 0, loopCopies: copies };
}

/** How deep `pattern`'s groups nest (escapes and character classes read past). */
function groupDepth(pattern: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "\\") i++;
    else if (ch === "[") {
      for (i++; i < pattern.length && pattern[i] !== "]"; i++) if (pattern[i] === "\\") i++;
    } else if (ch === "(") deepest = Math.max(deepest, ++depth);
    else if (ch === ")") depth = Math.max(0, depth - 1);
  }
  return deepest;
}
