import { readFile } from "node:fs/promises";

/** tokenizer_config.json's names for its special tokens (Hugging Face's `special_tokens_map`). */
export const SPECIAL_TOKEN_KEYS = [
  "bos_token",
  "eos_token",
  "unk_token",
  "sep_token",
  "pad_token",
  "cls_token",
  "mask_token",
] as const;

/**
 * A `tokenizer_config.json` (what `save_pretrained` writes beside tokenizer.json: its special
 * tokens, chat template, flags), its special tokens as plain strings, which is how Hugging
 * Face reads them and @huggingface/tokenizers expects them: the file may write one as an
 * AddedToken object (`{"content": "<s>", ...}`). Undefined where there is no such file.
 */
export async function readTokenizerConfig(
  path: string,
): Promise<Record<string, unknown> | undefined> {
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const plain: Record<string, unknown> = { ...config };
  for (const key of SPECIAL_TOKEN_KEYS) {
    const text = specialTokenText(config[key]);
    if (text === undefined) delete plain[key];
    else plain[key] = text;
  }
  if (Array.isArray(config.additional_special_tokens))
    plain.additional_special_tokens = config.additional_special_tokens
      .map(specialTokenText)
      .filter((t) => t !== undefined);
  return plain;
}

/** A special token as tokenizer_config.json writes it: a string, or `{content: string}`. */
export function specialTokenText(token: unknown): string | undefined {
  if (typeof token === "string") return token;
  if (token && typeof token === "object" && "content" in token) {
    const { content } = token as { content: unknown };
    if (typeof content === "string") return content;
  }
  return undefined;
}
