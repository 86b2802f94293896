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

describe("an EBNF grammar's counted repetitions", () => {
  const problem = (ebnf: string) => guidedProblem({ kind: "grammar", ebnf });

  it("refuses what writes out past 100,000 items: nested counts, through rules too, comments read both ways", () => {
    // three nested {0,999} had run the grammar thread past its 5 s compile budget
    expect(problem('root ::= ((("a"){0,999}){0,999}){0,999}')).toMatch(
      /writes out to more than 100000 items/,
    );
    expect(problem(`root ::= ${"(".repeat(20)}"a"${"){2}".repeat(20)}`)).toMatch(/writes out/);
    // the same nesting spread over rules
    expect(problem('root ::= a{0,999}\na ::= b{0,999}\nb ::= "x"{0,999}')).toMatch(/writes out/);
    // a comment that is one only by the lexer's reading of \r cannot hide a count
    expect(problem('root ::= a # c\ra ::= ("x"{999}){999}')).toMatch(/writes out/);
  });

  it("takes ordinary grammars, a single long count, recursion and many rules", () => {
    for (const ebnf of [
      'root ::= ("ab"){0,60000}',
      'root ::= [0-9]{4} "-" [0-9]{2} "-" [0-9]{2}',
      'root ::= value\nvalue ::= object | array | "1"\nobject ::= "{" (value ("," value)*)? "}"\narray ::= "[" value{0,10} "]"',
      `root ::= r0\n${Array.from({ length: 2_000 }, (_, i) => `r${i} ::= "a" r${i + 1} | "b"`).join("\n")}`,
      `root ::= ${"(".repeat(64)}"a"${")*".repeat(64)}`,
    ])
      expect(problem(ebnf), ebnf.slice(0, 60)).toBeUndefined();
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
