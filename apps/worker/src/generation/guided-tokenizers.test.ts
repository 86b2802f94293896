import { GrammarEngine, type GrammarGuide } from "@ferry/guided/engine";
import { HfTokenizer } from "@ferry/model-repository";
import { afterAll, describe, expect, it } from "vitest";
import { REAL_TOKENIZERS, WORDPIECE_TOKENIZER } from "../../../../test/helpers/tokenizer-texts.js";

/**
 * Guides the tokens a tokenizer encodes `text` to, as the engine does (mask, then take): each
 * must be allowed when it comes. Returns the mask after the last one.
 */
async function follow(
  guide: GrammarGuide,
  ids: readonly number[],
  size: number,
  tok: HfTokenizer,
): Promise<Float32Array> {
  for (const id of ids) {
    await guide.whenReady();
    const logits = new Float32Array(size);
    guide.mask(logits);
    expect(logits[id], `token ${JSON.stringify(tok.piece(id))}`).toBe(0);
    guide.advance(id);
  }
  await guide.whenReady();
  const logits = new Float32Array(size);
  guide.mask(logits);
  return logits;
}

// XGrammar reads every vocabulary as byte-level pieces of each token's bytes: these prove the
// bytes are right for a vocabulary that is not byte-level (the worker builds it the same way,
// generator-server's grammars.vocabulary(tokenizer, vocab_size))
describe("guided decoding over vocabularies that are not byte-level", () => {
  const engine = new GrammarEngine({ compileBudgetMs: 20_000, maskBudgetMs: 5_000 });
  afterAll(() => engine.shutdown());

  it("Gemma 3 (SentencePiece, ▁ and byte fallback): a JSON answer spelled by its own tokens", async () => {
    const tok = await HfTokenizer.load(
      REAL_TOKENIZERS["Gemma 3 (SentencePiece BPE, byte fallback)"],
    );
    const size = 262_208; // Gemma 3's logits, past its tokenizer's 262,145 ids
    const vocabulary = engine.vocabulary(tok, size);
    const schema = {
      type: "object",
      properties: { name: { type: "string" }, city: { type: "string" } },
      required: ["name", "city"],
    };
    const guide = await engine.open({ kind: "json_schema", schema }, vocabulary);
    const answer = '{"name": "Zoë 𓀀 the Scribe", "city": "São Paulo"}';
    const ids = tok.encode(answer);
    // ▁-words and the hieroglyph's byte tokens are both in it
    expect(ids.some((id) => tok.piece(id).startsWith("▁"))).toBe(true);
    expect(ids.some((id) => /^<0x[0-9A-F]{2}>$/.test(tok.piece(id)))).toBe(true);
    const end = await follow(guide, ids, size, tok);
    expect(end[tok.eosTokenId ?? -1]).toBe(0);
    // a special token never spells text, and past the vocabulary nothing is offered
    expect(end[105]).toBe(Number.NEGATIVE_INFINITY); // <start_of_turn>
    expect(end[262_200]).toBe(Number.NEGATIVE_INFINITY);
    guide.close();
  }, 120_000);

  it("WordPiece: a word's space and a ## piece's join, as the stream decodes them", async () => {
    const tok = await HfTokenizer.load(WORDPIECE_TOKENIZER);
    const size = 8192;
    // WordPiece writes a space before every word past the first: so does its grammar
    const guide = await engine.open(
      { kind: "regex", pattern: "( [a-z]+)+" },
      engine.vocabulary({ tokenBytes: (id) => tok.tokenBytes(id), eosTokenId: 3 }, size),
    );
    const ids = tok.encode("tokenization is unbelievable");
    expect(ids.some((id) => tok.piece(id).startsWith("##"))).toBe(true);
    const end = await follow(guide, ids, size, tok);
    expect(end[3]).toBe(0); // [SEP] as the end of text
    expect(end[tok.encode("!")[0] ?? -1]).toBe(Number.NEGATIVE_INFINITY);
    guide.close();
  });
});
