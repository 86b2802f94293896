import { readFile } from "node:fs/promises";
import { Tokenizer as HfTokenizerImpl } from "@huggingface/tokenizers";
import { type Tokenizer, tokenFromBytes } from "./tokenizer.js";

/**
 * A Hugging Face `tokenizer.json` (GPT-2's BPE and the like), so that a user's own Optimum
 * export drops into models/ with only a model.json. Decoding re-decodes the tail of the
 * sequence and emits what changed, since BPE pieces only become text in context.
 */
export class HfTokenizer implements Tokenizer {
  private constructor(
    private readonly impl: HfTokenizerImpl,
    readonly eosTokenId: number | undefined,
    /** Whether its vocabulary is written in GPT-2's byte-level alphabet. */
    private readonly byteLevel: boolean,
  ) {}

  get exactTokenBytes(): boolean {
    return this.byteLevel;
  }

  /** Tokens' texts as read so far (logprobs ask for several per token generated). */
  private readonly texts = new Map<number, { token: string; bytes: number[] }>();

  static async load(tokenizerJson: string, eosTokenId?: number): Promise<HfTokenizer> {
    const json = JSON.parse(await readFile(tokenizerJson, "utf8")) as Record<string, unknown>;
    const config = { add_bos_token: false, add_eos_token: false } as Record<string, unknown>;
    return new HfTokenizer(new HfTokenizerImpl(json, config), eosTokenId, isByteLevel(json));
  }

  encode(text: string, addSpecialTokens = false): number[] {
    return this.impl.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[]): string {
    return this.impl.decode([...ids], { skip_special_tokens: false });
  }

  piece(id: number): string {
    return this.impl.id_to_token(id) ?? "";
  }

  count(text: string, addSpecialTokens = false): number {
    return this.encode(text, addSpecialTokens).length;
  }

  get addsSpecialTokens(): boolean {
    this.adds ??= this.encode("a", true).length > this.encode("a").length;
    return this.adds;
  }

  private adds: boolean | undefined;

  tokenText(id: number): { token: string; bytes: number[] } {
    let text = this.texts.get(id);
    if (!text) {
      text = this.readTokenText(id);
      this.texts.set(id, text);
    }
    return text;
  }

  private readTokenText(id: number): { token: string; bytes: number[] } {
    // a byte-level piece spells its bytes, part of a character included
    const piece = this.byteLevel ? this.impl.id_to_token(id) : undefined;
    const bytes = piece === undefined ? [] : [...piece].map((c) => BYTE_OF.get(c));
    if (bytes.length > 0 && bytes.every((b) => b !== undefined)) return tokenFromBytes(bytes);
    // a special token, or another kind of vocabulary: its text alone
    const text = this.impl.decode([id], { skip_special_tokens: false });
    return { token: text, bytes: [...Buffer.from(text, "utf8")] };
  }

  decoder() {
    const ids: number[] = [];
    let emitted = "";
    const text = () => this.impl.decode(ids, { skip_special_tokens: true });
    return {
      push: (id: number) => {
        ids.push(id);
        const full = text();
        // an incomplete multi-byte piece decodes to U+FFFD: wait for the rest of it
        if (full.endsWith("\uFFFD")) return "";
        const next = full.slice(emitted.length);
        emitted = full;
        return next;
      },
      flush: () => {
        const full = text();
        const next = full.slice(emitted.length);
        emitted = full;
        return next;
      },
    };
  }
}

/**
 * GPT-2's byte-level alphabet, read backwards: the printable character a vocabulary writes
 * for each byte (bytes that print as themselves, then the rest from U+0100 on, in order).
 */
const BYTE_OF = (() => {
  const prints = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  const map = new Map<string, number>();
  let next = 256;
  for (let b = 0; b < 256; b++) map.set(String.fromCharCode(prints(b) ? b : next++), b);
  return map;
})();

/** Whether a tokenizer.json decodes with ByteLevel (alone or in a sequence of decoders). */
function isByteLevel(json: Record<string, unknown>): boolean {
  const decoder = json.decoder as { type?: string; decoders?: Array<{ type?: string }> } | null;
  if (!decoder) return false;
  return (
    decoder.type === "ByteLevel" || (decoder.decoders ?? []).some((d) => d.type === "ByteLevel")
  );
}
