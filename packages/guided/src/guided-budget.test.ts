import { describe, expect, it } from "vitest";
import { GrammarEngine } from "./grammar-engine.js";
import { guidedProblem, MAX_GRAMMAR_NESTING } from "./guided-budget.js";

const nested = (levels: number, inner = '"a"') =>
  `root ::= ${"(".repeat(levels)}${inner}${")".repeat(levels)}`;

describe("an EBNF grammar's budgets", () => {
  it("refuses groups nested deeper than the budget, counting none in strings, classes or comments", () => {
    expect(guidedProblem({ kind: "grammar", ebnf: nested(MAX_GRAMMAR_NESTING) })).toBeUndefined();
    expect(guidedProblem({ kind: "grammar", ebnf: nested(MAX_GRAMMAR_NESTING + 1) })).toMatch(
      /^the grammar nests groups deeper than 64 levels \(at character \d+\)$/,
    );
    const quoted = `root ::= "${"(".repeat(500)}" [(\\]${"(".repeat(500)}] "\\"((("\n`;
    expect(guidedProblem({ kind: "grammar", ebnf: quoted })).toBeUndefined();
    // where XGrammar's lexer ends a comment is its own: neither a line ended by \r nor a
    // quote inside a comment hides the groups after it
    const deep = `${"(".repeat(300)}"a"${")".repeat(300)}`;
    for (const ebnf of [`root ::= x # c\rx ::= ${deep}\n`, `root ::= x # "\nx ::= ${deep} # "\n`])
      expect(guidedProblem({ kind: "grammar", ebnf })).toMatch(/nests groups deeper than 64/);
    expect(guidedProblem({ kind: "grammar", ebnf: "x".repeat(65_537) })).toMatch(
      /65537 characters, more than 65536/,
    );
  });

  it("what the budget takes XGrammar compiles (200 nested groups had trapped its WebAssembly)", async () => {
    const engine = new GrammarEngine();
    const vocab = engine.vocabulary(
      { eosTokenId: 256, tokenBytes: (id: number) => (id < 256 ? [id] : []) },
      257,
    );
    try {
      const guide = await engine.open(
        { kind: "grammar", ebnf: nested(MAX_GRAMMAR_NESTING) },
        vocab,
      );
      guide.close();
      expect(engine.restarts).toBe(0);
    } finally {
      await engine.shutdown();
    }
  });
});

describe("a pattern's budgets", () => {
  it("refuses groups nested deeper than 64 (2,000 had trapped XGrammar's regex parser)", () => {
    const nested = (levels: number) => `${"(".repeat(levels)}a${")".repeat(levels)}`;
    expect(guidedProblem({ kind: "regex", pattern: nested(64) })).toBeUndefined();
    expect(guidedProblem({ kind: "regex", pattern: nested(2_000) })).toBe(
      "the pattern nests groups deeper than 64 levels",
    );
    // escaped and classed parentheses are characters
    expect(
      guidedProblem({ kind: "regex", pattern: `${"\\(".repeat(100)}[${"(".repeat(100)}]` }),
    ).toBeUndefined();
  });
});
