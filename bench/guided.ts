import { readFileSync } from "node:fs";
import { type Tokenizer, tokenFromBytes } from "@ferry/model-repository";
import { type ByteGrammar, GrammarGuide } from "../apps/worker/src/generation/guide.js";
import { JsonObjectGrammar } from "../apps/worker/src/generation/json-grammar.js";
import { schemaToRegex } from "../apps/worker/src/generation/json-schema-regex.js";
import { escapeRegex, RegexGrammar } from "../apps/worker/src/generation/regex-grammar.js";
import { quantile, round } from "./load.js";
import { printTable } from "./table.js";

/** Tokens in the bench's vocabulary: GPT-2's is 50,257. */
const VOCAB = 50_000;
/** Texts each guide spells, a different one each time; the hand method tries only the first few. */
const TEXTS = 24;
const HAND_TEXTS = 3;

/**
 * A byte-level vocabulary of GPT-2's size without downloading one: every byte, then the most
 * frequent word pieces (with and without a leading space), digit runs and punctuation runs of
 * TypeScript's lib.dom.d.ts (an npm package), each piece's prefixes counted, as BPE merges
 * build words from their beginnings.
 */
function pieceVocabulary(): { tokenizer: Tokenizer; pieces: number[][] } {
  const text = readFileSync("node_modules/typescript/lib/lib.dom.d.ts", "utf8");
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/ ?[A-Za-z]+| ?[0-9]{1,3}|[^\sA-Za-z0-9]{1,3}|\s+/g))
    for (let i = 2; i <= m[0].length; i++) {
      const piece = m[0].slice(0, i);
      counts.set(piece, (counts.get(piece) ?? 0) + 1);
    }
  const words = [...counts]
    .sort((a, b) => b[1] - a[1])
    .slice(0, VOCAB - 257)
    .map(([piece]) => [...Buffer.from(piece)]);
  const pieces = [...Array.from({ length: 256 }, (_, b) => [b]), ...words];
  const texts = pieces.map((bytes) => tokenFromBytes(bytes));
  const eos = pieces.length;
  const tokenizer: Tokenizer = {
    eosTokenId: eos,
    exactTokenBytes: true,
    addsSpecialTokens: false,
    tokenText: (id) => texts[id] ?? { token: "", bytes: [] },
    encode: (t) => [...Buffer.from(t)],
    count: (t) => Buffer.byteLength(t),
    decoder: () => ({ push: () => "", flush: () => "" }),
    decode: (ids) => Buffer.concat(ids.map((id) => Buffer.from(texts[id]?.bytes ?? []))).toString(),
    piece: (id) => texts[id]?.token ?? "",
  };
  return { tokenizer, pieces };
}

/** `text` as the ids of the vocabulary's longest pieces, left to right: the tokens a model would draw. */
function tokenize(text: string, pieces: number[][]): number[] {
  const byKey = new Map(pieces.map((p, id) => [Buffer.from(p).toString("latin1"), id]));
  const bytes = Buffer.from(text);
  const out: number[] = [];
  for (let at = 0; at < bytes.length; ) {
    for (let len = Math.min(24, bytes.length - at); len >= 1; len--) {
      const id = byKey.get(bytes.subarray(at, at + len).toString("latin1"));
      if (id !== undefined) {
        out.push(id);
        at += len;
        break;
      }
    }
  }
  return out;
}

const FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia"];
const LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"];
const TAGS = ["compiler", "network", "storage", "graphics", "kernel", "database", "browser"];

/** The k-th person record: every text differs (name, age, tags), as every answer would. */
function person(k: number): Record<string, unknown> {
  return {
    name: `${FIRST[k % FIRST.length]} ${LAST[(k * 7) % LAST.length]} ${k}`,
    age: 20 + ((k * 13) % 70),
    tags: TAGS.filter((_, i) => (k >> i) & 1).slice(0, 3),
    active: k % 3 !== 0,
  };
}

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    tags: { type: "array", items: { type: "string" } },
    active: { type: "boolean" },
  },
  required: ["name", "age", "tags", "active"],
};

/** One guide kind: its grammar, and the texts it spells (each as the tokens a model draws). */
interface Kind {
  name: string;
  grammar: () => ByteGrammar;
  text: (k: number) => string;
}

const KINDS: Kind[] = [
  {
    name: "json_object (response_format)",
    grammar: () => new JsonObjectGrammar(),
    text: (k) => JSON.stringify(person(k), null, 1),
  },
  {
    name: "json_schema (4 fields)",
    grammar: () => new RegexGrammar(schemaToRegex(SCHEMA)),
    text: (k) => JSON.stringify(person(k)),
  },
  {
    name: "guided_choice (72 names)",
    grammar: () =>
      new RegexGrammar(FIRST.flatMap((f) => LAST.map((l) => escapeRegex(`${f} ${l}`))).join("|")),
    text: (k) => `${FIRST[k % FIRST.length]} ${LAST[(k * 5) % LAST.length]}`,
  },
];

/** The tokens a grammar takes, each tried alone on a copy: what every step cost before the trie. */
function maskByHand(grammar: ByteGrammar, tokenizer: Tokenizer, logits: Float32Array): void {
  for (let id = 0; id < logits.length; id++) {
    const ok =
      id === tokenizer.eosTokenId
        ? grammar.complete
        : (() => {
            const copy = grammar.copy();
            return tokenizer.tokenText(id).bytes.every((b) => copy.feed(b));
          })();
    if (!ok) logits[id] = Number.NEGATIVE_INFINITY;
  }
}

/**
 * Milliseconds per step of spelling each text (token ids): a fresh sequence per text, the
 * logits masked before each token, then the token taken. A drawn token the mask refused fails
 * the bench: it would be measuring a wrong mask.
 */
function spell(
  name: string,
  texts: number[][],
  start: () => { mask(logits: Float32Array): void; advance(id: number): void },
  size: number,
): number[] {
  const steps: number[] = [];
  const logits = new Float32Array(size);
  for (const tokens of texts) {
    const sequence = start();
    for (const id of tokens) {
      logits.fill(0);
      const t0 = performance.now();
      sequence.mask(logits);
      steps.push(performance.now() - t0);
      if (logits[id] === Number.NEGATIVE_INFINITY) throw new Error(`${name}: token ${id} masked`);
      sequence.advance(id);
    }
  }
  return steps;
}

function summary(steps: number[]): {
  steps: number;
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
} {
  const sorted = [...steps].sort((a, b) => a - b);
  return {
    steps: steps.length,
    mean_ms: round(steps.reduce((a, b) => a + b, 0) / Math.max(1, steps.length), 3),
    p50_ms: round(quantile(sorted, 0.5), 3),
    p99_ms: round(quantile(sorted, 0.99), 3),
  };
}

export async function guidedBench(): Promise<Record<string, unknown>> {
  const { tokenizer, pieces } = pieceVocabulary();
  const size = pieces.length + 1;
  const t0 = performance.now();
  new GrammarGuide(new JsonObjectGrammar(), tokenizer, size);
  const trieMs = round(performance.now() - t0, 1);
  console.log(
    `guided decoding bench: what masking the logits costs per token generated, at a ${size}-token byte-level vocabulary (every byte + the most frequent word pieces of TypeScript's lib.dom.d.ts), one sequence spelling ${TEXTS} different texts per guide kind (each text as the vocabulary's longest pieces, the tokens a model would draw); (hand) every token tried alone on a copy of the grammar, as every step was before; (guide) GrammarGuide: the vocabulary's trie walked once per state met, the state's mask then kept for every sequence; the first text starts with nothing kept`,
  );
  const rows: Array<Record<string, string | number>> = [];
  const ratios: Array<Record<string, string | number>> = [];
  const result: Record<string, unknown> = { vocab_size: size, trie_build_ms: trieMs };
  for (const kind of KINDS) {
    const texts = Array.from({ length: TEXTS }, (_, k) => tokenize(kind.text(k), pieces));
    // first, so that its first text meets nothing kept (the hand method below shares the
    // pattern's automaton, and its steps learnt); one guide per text, as one per request
    const guided = spell(
      kind.name,
      texts,
      () => new GrammarGuide(kind.grammar(), tokenizer, size),
      size,
    );
    const byHand = spell(
      kind.name,
      texts.slice(0, HAND_TEXTS),
      () => {
        const grammar = kind.grammar();
        return {
          mask: (logits) => maskByHand(grammar, tokenizer, logits),
          advance: (id) => {
            for (const b of tokenizer.tokenText(id).bytes) grammar.feed(b);
          },
        };
      },
      size,
    );
    const firstSteps = texts[0]?.length ?? 0;
    const hand = summary(byHand);
    const first = summary(guided.slice(0, firstSteps));
    const later = summary(guided.slice(firstSteps));
    rows.push({ guide: kind.name, method: "hand", texts: HAND_TEXTS, ...hand });
    rows.push({ guide: kind.name, method: "guide, first text", texts: 1, ...first });
    rows.push({ guide: kind.name, method: "guide, later texts", texts: TEXTS - 1, ...later });
    ratios.push({
      guide: kind.name,
      "hand mean / guide mean (later texts)": round(hand.mean_ms / later.mean_ms, 1),
      "hand p50 / guide p50 (later texts)": round(hand.p50_ms / later.p50_ms, 1),
      "hand mean / guide mean (first text)": round(hand.mean_ms / first.mean_ms, 1),
    });
    result[kind.name] = { hand, guide_first_text: first, guide_later_texts: later };
  }
  printTable("(a) mask cost per generated token", rows);
  console.log(`(the vocabulary's trie was built once, by the first guide: ${trieMs} ms)`);
  printTable("ratios", ratios);
  return { ...result, ratios };
}
