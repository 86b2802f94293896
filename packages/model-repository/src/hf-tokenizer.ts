import { readFile } from "node:fs/promises";
import { Tokenizer as HfTokenizerImpl } from "@huggingface/tokenizers";
import type { Tokenizer } from "./tokenizer.js";

/**
 * A Hugging Face `tokenizer.json` (GPT-2's BPE and the like), so that a user's own Optimum
 * export drops into models/ with only a model.json. Decoding re-decodes the tail of the
 * sequence and emits what changed, since BPE pieces only become text in context.
 */
export class HfTokenizer implements Tokenizer {
  private constructor(
    private readonly impl: HfTokenizerImpl,
    readonly eosTokenId: number | undefined,
  ) {}

  static async load(tokenizerJson: string, eosTokenId?: number): Promise<HfTokenizer> {
    const json = JSON.parse(await readFile(tokenizerJson, "utf8")) as Record<string, unknown>;
    const config = { add_bos_token: false, add_eos_token: false } as Record<string, unknown>;
    return new HfTokenizer(new HfTokenizerImpl(json, config), eosTokenId);
  }

  encode(text: string): number[] {
    return this.impl.encode(text, { add_special_tokens: false }).ids;
  }

  count(text: string): number {
    return this.encode(text).length;
  }

  tokenText(id: number): { token: string; bytes: number[] } {
    const text = this.impl.decode([id], { skip_special_tokens: false });
    // a piece of a character alone decodes to U+FFFD: its bytes are not known here
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
