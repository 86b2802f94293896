import { parentPort } from "node:worker_threads";
import type {
  CompiledGrammar,
  GrammarCompiler,
  GrammarMatcher,
  StructuralTag,
  TokenizerInfo,
} from "@mlc-ai/web-xgrammar";
import type { GrammarReply, GrammarRequest, VocabularyData } from "./grammar-messages.js";
import { choiceGrammar, type GuidedSpec } from "./guided-spec.js";
import { regexEbnf } from "./regex-automaton.js";
import { xgrammar } from "./xgrammar.js";
import { type Rules, spellingRules, xgrammarSchema } from "./xgrammar-schema.js";

/**
 * The grammar thread: XGrammar's compiler, its compiled grammars and every sequence's matcher
 * live here, so that compiling a schema or finding a mask never runs on the loop that serves
 * the batches, and a grammar that takes too long can be stopped by ending the thread.
 */
const port = parentPort;
if (!port) throw new Error("grammar-thread runs as a worker thread");

/**
 * XGrammar reports a grammar it cannot take on stderr, then aborts the call; the last line
 * it wrote is the reason. Set before the module starts, which binds its printer once.
 */
let lastError = "";
console.error = (...args: unknown[]) => {
  const line = args.map(String).join(" ");
  // "[FATAL] /path/json_schema_converter.cc:902: Unsupported type" -> "Unsupported type"
  const fatal = /^\[FATAL\] \S+:\d+: (.*)$/s.exec(line);
  if (fatal?.[1]) lastError = fatal[1];
  else if (!line.startsWith("Aborted(") && !line.startsWith("[WARNING]")) lastError ||= line;
};

/**
 * Hermes' calls in free text as XGrammar's structural tag: anything until `<tool_call>`, then
 * one of the tools' heads and arguments by its parameters, then `</tool_call>` and free text
 * again (Hermes' and Qwen's templates teach `{"name": ..., "arguments": {...}}`).
 */
async function hermesCalls(
  tools: ReadonlyArray<{ name: string; parameters: Record<string, unknown> }>,
  single: boolean,
): Promise<StructuralTag> {
  const tags = [];
  for (const tool of tools) {
    const { schema, spellings } = xgrammarSchema(tool.parameters);
    tags.push({
      type: "tag" as const,
      begin: `<tool_call>\n{"name": ${JSON.stringify(tool.name)}, "arguments": `,
      content:
        spellings.size === 0
          ? { type: "json_schema" as const, json_schema: schema as Record<string, unknown> }
          : { type: "grammar" as const, grammar: await schemaEbnf(schema, spellings) },
      end: "}\n</tool_call>",
    });
  }
  return {
    type: "structural_tag",
    format: { type: "triggered_tags", triggers: ["<tool_call>"], tags, stop_after_first: single },
  };
}

/**
 * A schema with markers as EBNF: XGrammar's own conversion (the options every schema is
 * compiled with), each marker replaced by its exact spelling (a number's range, an enum's values).
 */
async function schemaEbnf(schema: unknown, spellings: ReadonlyMap<string, Rules>): Promise<string> {
  const grammar = await xgrammar().Grammar.fromJSONSchema(
    JSON.stringify(schema),
    false,
    -1,
    SEPARATORS,
    true,
  );
  try {
    return spellingRules(grammar.toString(), spellings);
  } finally {
    grammar.dispose();
  }
}

/** What JSON texts separate items and keys with: `json.dumps`'s. */
const SEPARATORS: [string, string] = [", ", ": "];

/**
 * JSON mode: any one object (RFC 8259), laid out as the model likes, but no run of more than 16
 * blanks (a model looping on blanks must go on). XGrammar's own JSON grammar leaves runs
 * between items unbounded whatever its whitespace limit says.
 */
const JSON_OBJECT = String.raw`root ::= object
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)* ws)? "}"
array ::= "[" ws (value (ws "," ws value)* ws)? "]"
string ::= "\"" char* "\""
char ::= [^\0-\x1f\"\\] | "\\" (["\\/bfnrt] | "u" [A-Fa-f0-9]{4})
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
ws ::= [ \t\n\r]{0,16}`;

/** Bytes of compiled grammars kept per vocabulary, least recently used first out. */
const CACHE_BYTES = 64 * 1024 * 1024;

interface Vocabulary {
  info: TokenizerInfo;
  compiler: GrammarCompiler;
  /** Compiled grammars by spec key, with the memory each one's compiling took. */
  compiled: Map<string, { grammar: CompiledGrammar; bytes: number }>;
  bytes: number;
}

const vocabularies = new Map<number, Vocabulary>();
const matchers = new Map<number, GrammarMatcher>();

function wasmBytes(): number {
  return process.memoryUsage().external;
}

async function addVocabulary(data: VocabularyData): Promise<void> {
  const xg = xgrammar();
  const info = await xg.TokenizerInfo.createTokenizerInfo(
    data.pieces,
    "byte_level",
    false,
    data.size,
    data.stopIds,
  );
  const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
  vocabularies.set(data.id, { info, compiler, compiled: new Map(), bytes: 0 });
}

async function compile(compiler: GrammarCompiler, spec: GuidedSpec): Promise<CompiledGrammar> {
  switch (spec.kind) {
    case "json_schema": {
      const { schema, spellings } = xgrammarSchema(spec.schema);
      if (spellings.size > 0) return compiler.compileGrammar(await schemaEbnf(schema, spellings));
      // properties the schema does not name are not written (vLLM's strict mode); one line with
      // Python's separators, so that a model cannot pad forever
      return compiler.compileJSONSchema(JSON.stringify(schema), false, -1, SEPARATORS, true);
    }
    case "json_object":
      return compiler.compileGrammar(JSON_OBJECT);
    case "regex": {
      // a deterministic automaton where one can be built (XGrammar's own matches overlapping
      // alternatives loosely), else XGrammar's regex
      const rules = regexEbnf(spec.pattern, "root", "raw");
      if (rules) return compiler.compileGrammar(rules);
      return compiler.compileStructuralTag({
        type: "structural_tag",
        format: { type: "regex", pattern: spec.pattern },
      });
    }
    case "choice":
      return compiler.compileGrammar(choiceGrammar(spec.choices));
    case "grammar":
      return compiler.compileGrammar(spec.ebnf);
    case "tool_calls":
      return compiler.compileStructuralTag(await hermesCalls(spec.tools, spec.single === true));
  }
}

/** The spec's compiled grammar, from the cache or compiled now (and cached within its bytes). */
async function compiled(
  vocab: Vocabulary,
  key: string,
  spec: GuidedSpec,
): Promise<CompiledGrammar> {
  const hit = vocab.compiled.get(key);
  if (hit) {
    vocab.compiled.delete(key);
    vocab.compiled.set(key, hit);
    return hit.grammar;
  }
  const before = wasmBytes();
  const grammar = await compile(vocab.compiler, spec);
  // the memory its compiling grew by, at least its spec's size: the heap reuses freed space
  const bytes = Math.max(wasmBytes() - before, JSON.stringify(spec).length * 16);
  vocab.compiled.set(key, { grammar, bytes });
  vocab.bytes += bytes;
  for (const [oldKey, old] of vocab.compiled) {
    if (vocab.bytes <= CACHE_BYTES || oldKey === key) break;
    vocab.compiled.delete(oldKey);
    vocab.bytes -= old.bytes;
    old.grammar.dispose();
  }
  return grammar;
}

async function maskOf(id: number, matcher: GrammarMatcher): Promise<GrammarReply> {
  const mask = await matcher.getNextTokenBitmask();
  const words = mask.buffer.slice(mask.byteOffset, mask.byteOffset + mask.byteLength);
  return { type: "mask", id, words: words as ArrayBuffer, memoryBytes: wasmBytes() };
}

function accept(matcher: GrammarMatcher, tokens: readonly number[]): void {
  for (const token of tokens)
    if (!matcher.acceptToken(token))
      throw new Error(`token ${token} is not allowed by the grammar here`);
}

async function handle(msg: GrammarRequest): Promise<GrammarReply> {
  switch (msg.type) {
    case "vocabulary":
      await addVocabulary(msg.vocabulary);
      return { type: "done", id: msg.id };
    case "open": {
      const vocab = vocabularies.get(msg.vocabulary);
      if (!vocab) throw new Error(`unknown vocabulary ${msg.vocabulary}`);
      let grammar: CompiledGrammar;
      try {
        grammar = await compiled(vocab, msg.key, msg.spec);
      } catch (err) {
        const broken = brokeWebAssembly(err, lastError);
        return {
          type: "error",
          id: msg.id,
          message:
            lastError ||
            (broken
              ? `XGrammar failed compiling it (${(err as Error).message}); nest it less deeply or make it smaller`
              : "the grammar was refused"),
          invalid: true,
          ...(broken ? { broken } : {}),
        };
      }
      const matcher = await xgrammar().GrammarMatcher.createGrammarMatcher(grammar);
      matchers.get(msg.seq)?.dispose();
      matchers.set(msg.seq, matcher);
      accept(matcher, msg.tokens);
      return maskOf(msg.id, matcher);
    }
    case "advance": {
      const matcher = matchers.get(msg.seq);
      if (!matcher) throw new Error(`no matcher for sequence ${msg.seq}`);
      accept(matcher, msg.tokens);
      return maskOf(msg.id, matcher);
    }
    case "close":
      matchers.get(msg.seq)?.dispose();
      matchers.delete(msg.seq);
      return { type: "done", id: msg.id };
  }
}

/**
 * Whether `err` came from XGrammar's WebAssembly itself failing (a trap: its stack, in the
 * module's memory, run into its heap by a deeply nested schema), not from XGrammar refusing a
 * spec: a refusal aborts too, but says why on stderr first (`said`), and the module goes on.
 * After a trap its memory may be corrupt: later calls failed "memory access out of bounds"
 * for every request, so the thread must go.
 */
function brokeWebAssembly(err: unknown, said: string): boolean {
  if (said !== "") return false;
  // WebAssembly.RuntimeError, by its name: this project's types leave the WebAssembly namespace out
  return (err instanceof Error && err.name === "RuntimeError") || err instanceof RangeError;
}

// one request at a time, in order: a sequence's advance never overtakes its open
let queue = Promise.resolve();
port.on("message", (msg: GrammarRequest) => {
  queue = queue.then(async () => {
    lastError = "";
    let reply: GrammarReply;
    try {
      reply = await handle(msg);
    } catch (err) {
      const message = lastError || (err instanceof Error ? err.message : String(err));
      reply = { type: "error", id: msg.id, message, invalid: false };
      if (brokeWebAssembly(err, lastError)) reply.broken = true;
    }
    port.postMessage(reply, reply.type === "mask" ? [reply.words] : []);
  });
});
port.postMessage({ type: "ready" } satisfies GrammarReply);
