import { loopCopies } from "./repetition-loops.js";

/** What the API's budgets read of an EBNF grammar, in one pass over its text. */
export interface GrammarReading {
  /** Where its groups first nest deeper than the reader was asked about, if they do. */
  nestedPastAt: number | undefined;
  /** Items it stands for written out (`grammarExpansion`), capped just past the cap asked. */
  size: number;
  /** Copies its counted repetitions make of a loop (`loopCopies`), at most: 0 for none. */
  loopCopies: number;
}

/**
 * Reads `ebnf` once for how deep its groups nest (parentheses in strings and character
 * classes aside) and how large it is written out. `comments` says whether `#` opens one (to a
 * `\n` or `\r`): the budget reads a grammar both ways, as where a comment ends is XGrammar's
 * lexer's to say.
 */
export function readGrammar(
  ebnf: string,
  comments: boolean,
  { maxNesting, cap }: { maxNesting: number; cap: number },
): GrammarReading {
  const read = tokens(ebnf, comments, maxNesting);
  const { size, loopCopies } = grammarExpansion(read.tokens, cap);
  return { nestedPastAt: read.nestedPastAt, size, loopCopies };
}

/**
 * How many items an EBNF grammar stands for once its counted repetitions are written out, as
 * the regex budget counts a pattern: `x{n}` and `x{m,n}` are `x` n times, a group the sum of
 * its items (its largest alternative), a rule reference the size of that rule (a reference
 * back into a rule still being sized, recursion, counts one). XGrammar's compile time grows
 * with it: three nested `{0,999}` ran past the compile budget, twenty nested `{2}` took 3.5 s,
 * while one `{0,60000}` compiled at once. Values are capped just past `cap`.
 */
function grammarExpansion(all: Token[], cap: number): Sized {
  const rules = ruleBodies(all);
  const size = new Map<string, Sized>();
  const sizing = new Set<string>();
  const limit = (n: number) => Math.min(n, cap + 1);
  // each rule sized once its references are, without recursion on this thread's stack: a
  // chain of thousands of rules is a long list here, not a deep call
  const order: string[] = [];
  for (const start of rules.keys()) {
    if (size.has(start) || sizing.has(start)) continue;
    const stack: Array<{ name: string; refs: string[]; next: number }> = [
      { name: start, refs: refsOf(rules.get(start) ?? []), next: 0 },
    ];
    sizing.add(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as (typeof stack)[number];
      const ref = top.refs[top.next++];
      if (ref === undefined) {
        stack.pop();
        sizing.delete(top.name);
        const sized = bodySize(rules.get(top.name) ?? [], size, limit);
        size.set(top.name, { size: limit(sized.size), loopCopies: limit(sized.loopCopies) });
        order.push(top.name);
        continue;
      }
      if (size.has(ref) || sizing.has(ref) || !rules.has(ref)) continue;
      sizing.add(ref);
      stack.push({ name: ref, refs: refsOf(rules.get(ref) ?? []), next: 0 });
    }
  }
  const largest = { size: 0, loopCopies: 0 };
  for (const name of order) {
    const sized = size.get(name);
    largest.size = Math.max(largest.size, sized?.size ?? 0);
    largest.loopCopies = Math.max(largest.loopCopies, sized?.loopCopies ?? 0);
  }
  return largest;
}

/** A rule's or an item's size written out, and the copies it makes of a loop (`loopCopies`). */
interface Sized {
  size: number;
  loopCopies: number;
}

type Token =
  | { kind: "atom" }
  | { kind: "name"; name: string }
  | { kind: "assign" }
  | { kind: "open" }
  | { kind: "close" }
  | { kind: "bar" }
  | { kind: "count"; times: number };

function tokens(
  ebnf: string,
  comments: boolean,
  maxNesting: number,
): { tokens: Token[]; nestedPastAt: number | undefined } {
  const out: Token[] = [];
  let depth = 0;
  let nestedPastAt: number | undefined;
  for (let k = 0; k < ebnf.length; k++) {
    const c = ebnf[k] as string;
    if (c === "#" && comments) {
      while (k < ebnf.length && ebnf[k] !== "\n" && ebnf[k] !== "\r") k++;
    } else if (c === '"' || c === "[") {
      const close = c === '"' ? '"' : "]";
      for (k++; k < ebnf.length && ebnf[k] !== close; k++) if (ebnf[k] === "\\") k++;
      out.push({ kind: "atom" });
    } else if (c === "(") {
      out.push({ kind: "open" });
      if (++depth > maxNesting) nestedPastAt ??= k;
    } else if (c === ")") {
      out.push({ kind: "close" });
      depth = Math.max(0, depth - 1);
    } else if (c === "|") out.push({ kind: "bar" });
    else if (c === ":" && ebnf.startsWith("::=", k)) {
      out.push({ kind: "assign" });
      k += 2;
    } else if (c === "{") {
      const end = ebnf.indexOf("}", k);
      const bounds = (end < 0 ? "" : ebnf.slice(k + 1, end)).split(",");
      const upper = Number(bounds[1]?.trim() || bounds[0]?.trim());
      out.push({ kind: "count", times: Number.isFinite(upper) && upper > 0 ? upper : 1 });
      if (end > 0) k = end;
    } else if (nameStart(ebnf.charCodeAt(k))) {
      let end = k + 1;
      while (end < ebnf.length && namePart(ebnf.charCodeAt(end))) end++;
      out.push({ kind: "name", name: ebnf.slice(k, end) });
      k = end - 1;
    }
  }
  return { tokens: out, nestedPastAt };
}

/** The grammar's rules by name, each its body's tokens (a name before `::=` starts one). */
function ruleBodies(all: Token[]): Map<string, Token[]> {
  const rules = new Map<string, Token[]>();
  let body: Token[] | undefined;
  for (let k = 0; k < all.length; k++) {
    const token = all[k] as Token;
    const next = all[k + 1];
    if (token.kind === "name" && next?.kind === "assign") {
      body = [];
      rules.set(token.name, body);
      k++;
    } else body?.push(token);
  }
  return rules;
}

function refsOf(body: Token[]): string[] {
  const refs: string[] = [];
  for (const token of body) if (token.kind === "name") refs.push(token.name);
  return refs;
}

/**
 * A body's size and the copies it makes of a loop (`loopCopies`), its references read from
 * `sizes` (one not there counts one, and no loop).
 */
function bodySize(
  body: Token[],
  sizes: ReadonlyMap<string, Sized>,
  limit: (n: number) => number,
): Sized {
  // each open group: its finished alternatives' largest size and the one being read, and
  // the most copies of a loop among its items
  const stack: Array<{ best: number; branch: number; copies: number }> = [
    { best: 0, branch: 0, copies: 0 },
  ];
  let last = 0;
  let lastCopies = 0;
  for (const token of body) {
    const top = stack[stack.length - 1] as { best: number; branch: number; copies: number };
    if (token.kind === "atom" || token.kind === "name") {
      const ref = token.kind === "name" ? sizes.get(token.name) : undefined;
      last = token.kind === "atom" ? 1 : (ref?.size ?? 1);
      lastCopies = ref?.loopCopies ?? 0;
      top.branch = limit(top.branch + last);
      top.copies = Math.max(top.copies, lastCopies);
    } else if (token.kind === "open") stack.push({ best: 0, branch: 0, copies: 0 });
    else if (token.kind === "close" && stack.length > 1) {
      const done = stack.pop() as { best: number; branch: number; copies: number };
      last = Math.max(done.best, done.branch);
      lastCopies = done.copies;
      const outer = stack[stack.length - 1] as { best: number; branch: number; copies: number };
      outer.branch = limit(outer.branch + last);
      outer.copies = Math.max(outer.copies, lastCopies);
    } else if (token.kind === "bar") {
      top.best = Math.max(top.best, top.branch);
      top.branch = 0;
    } else if (token.kind === "count") {
      // the item was counted once as it was read: the rest of its copies
      top.branch = limit(top.branch + last * (token.times - 1));
      last = limit(last * token.times);
      lastCopies = limit(loopCopies(lastCopies, token.times));
      top.copies = Math.max(top.copies, lastCopies);
    }
  }
  let size = 0;
  let copies = 0;
  for (const frame of stack) {
    size = Math.max(size, frame.best, frame.branch);
    copies = Math.max(copies, frame.copies);
  }
  return { size, loopCopies: copies };
}

/** A letter or `_`: what a rule's name starts with. */
function nameStart(code: number): boolean {
  return (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95;
}

/** A letter, digit, `_`, `.` or `-`: what a rule's name goes on with. */
function namePart(code: number): boolean {
  return nameStart(code) || (code >= 48 && code <= 57) || code === 46 || code === 45;
}
