import { join } from "node:path";
import { z } from "zod";
import { HfTokenizer } from "./hf-tokenizer.js";
import { ByteTokenizer, type Tokenizer } from "./tokenizer.js";

/** How a generator's model.json names its tokenizer. */
export const tokenizerConfigSchema = z.object({
  type: z.enum(["byte", "huggingface"]),
  eos_token_id: z.number().int().optional(),
  /** For "huggingface": tokenizer.json, relative to the model's directory. */
  file: z.string().default("tokenizer.json"),
});
export type TokenizerConfig = z.infer<typeof tokenizerConfigSchema>;

/** The tokenizer a generator's model.json names, loaded from the model's directory. */
export async function loadTokenizer(dir: string, config: TokenizerConfig): Promise<Tokenizer> {
  if (config.type === "byte") return new ByteTokenizer(config.eos_token_id);
  return HfTokenizer.load(join(dir, config.file), config.eos_token_id);
}
