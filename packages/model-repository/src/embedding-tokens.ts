import type { Tokenizer } from "./tokenizer.js";

/**
 * The ids an embedder reads for a text: with the special tokens its tokenizer's post-processor
 * adds ([CLS] … [SEP] for BERT), as sentence-transformers and vLLM encode an input, its content
 * cut to its last tokens where `truncate` (vLLM's `truncate_prompt_tokens`) says so, the
 * special tokens kept around them. The API counts with it and the worker runs it, so both read
 * one text the same way.
 */
export function withSpecials(
  tokenizer: Pick<Tokenizer, "encode">,
  text: string,
  truncate?: number,
): number[] {
  const full = tokenizer.encode(text, true);
  if (truncate === undefined || full.length <= truncate) return full;
  const content = tokenizer.encode(text, false);
  const added = full.length - content.length;
  // where the content starts among the added tokens
  let before = 0;
  while (before < added && !content.every((id, k) => full[before + k] === id)) before++;
  const kept = content.slice(content.length - Math.max(0, truncate - added));
  return [...full.slice(0, before), ...kept, ...full.slice(before + content.length)];
}
