import { describe, expect, it } from "vitest";
import { GrammarEngine } from "./grammar-engine.js";
import { guidedProblem, MAX_GRAMMAR_NESTING } from "./guided-budget.js";
import type { GuidedSpec } from "./guided-spec.js";

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

describe("a counted repetition past 128 inside others (XGrammar keeps it a loop)", () => {
  const grammar = (ebnf: string) => guidedProblem({ kind: "grammar", ebnf });
  const pattern = (p: string) => guidedProblem({ kind: "regex", pattern: p });

  it("is refused once the counts around it copy it more than 8 times, in a grammar, through its rules, in a pattern and a schema's", () => {
    // 112 bytes that held a model's grammar thread for its 5 s budget (an attack's)
    expect(grammar('root ::= (("a"|"b"){0,316}){0,316} "c"')).toMatch(
      /repeats a counted repetition of more than 128 inside others that copy it 316 times, more than 8/,
    );
    expect(grammar('root ::= (("a"|"b"){0,200}){0,40}')).toMatch(/copy it 40 times/);
    expect(grammar('root ::= (("a"|"b"){0,200}){0,3}{0,3}')).toMatch(/copy it 9 times/);
    expect(grammar('root ::= (r){0,20}\nr ::= ("a"|"b"){0,300}')).toMatch(/copy it 20 times/);
    expect(pattern("((a|b){0,200}){0,40}")).toMatch(/^the pattern repeats .* copy it 40 times/);
    expect(
      guidedProblem({
        kind: "json_schema",
        schema: { type: "string", pattern: "^((a|b){0,200}){0,40}$" },
      }),
    ).toMatch(/copy it 40 times/);
  });

  it("is taken with up to 8 copies, and counts up to 128 nest as the expansion budget allows", () => {
    for (const ebnf of [
      'root ::= (("a"|"b"){0,200}){0,8}',
      'root ::= (("a"|"b"){0,120}){0,120}',
      'root ::= (("a"|"b"){0,40}){0,200}',
      'root ::= ("a"|"b"){0,9000}',
    ])
      expect(grammar(ebnf), ebnf).toBeUndefined();
    expect(pattern("((a|b){0,200}){0,8}")).toBeUndefined();
    expect(pattern("[0-9]{1,300}(,[0-9]{1,3}){0,100}")).toBeUndefined();
  });

  it("what it takes at its edge compiles well inside the compile budget", async () => {
    const engine = new GrammarEngine({ compileBudgetMs: 5_000 });
    const vocab = engine.vocabulary(
      { eosTokenId: 256, tokenBytes: (id: number) => (id < 256 ? [id] : []) },
      257,
    );
    try {
      const guide = await engine.open(
        { kind: "grammar", ebnf: 'root ::= (("a"|"b"){0,200}){0,8} "c"' },
        vocab,
      );
      guide.close();
      expect(engine.restarts).toBe(0);
    } finally {
      await engine.shutdown();
    }
  });
});

/** `n` tools, each an object of 20 optional properties and `extra` beside them. */
function tools(n: number, extra: Record<string, unknown> = {}): GuidedSpec {
  const parameters = {
    type: "object",
    ...extra,
    properties: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, {}])),
  };
  return {
    kind: "tool_calls",
    format: "hermes",
    tools: Array.from({ length: n }, (_, k) => ({ name: `t${k}`, parameters })),
  };
}

describe("a request's tools", () => {
  it("count their schemas' objects together: 128 tools of 20 properties each are one grammar past the budget", () => {
    expect(guidedProblem(tools(97))).toBeUndefined();
    expect(guidedProblem(tools(98))).toBe(
      "at /tools/97/function/parameters/properties/p10: the tools' schemas have together more than 2048 subschemas",
    );
  });

  it("count the optional properties of objects that bound their count together: 64 at most", () => {
    expect(guidedProblem(tools(3, { minProperties: 1 }))).toBeUndefined();
    expect(guidedProblem(tools(4, { minProperties: 1 }))).toBe(
      "at /tools/3/function/parameters: the tools' schemas have together more than 64 optional properties in objects with minProperties or maxProperties (they would not compile in time): make them required, or drop the bound",
    );
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
