/** What of @huggingface/tokenizers' WordPiece model its greedy match reads. */
export interface WordPieceModel {
  config: { type?: string; continuing_subword_prefix?: string };
  tokens_to_ids: Map<string, number>;
  max_input_chars_per_word: number;
  unk_token: string;
  encode(words: string[]): string[];
}

/** Whether `model` (a Hugging Face tokenizer's) is a WordPiece one this module can bound. */
export function isWordPiece(model: unknown): model is WordPieceModel {
  const m = model as Partial<WordPieceModel> | undefined;
  return (
    m?.config?.type === "WordPiece" &&
    m.tokens_to_ids instanceof Map &&
    typeof m.max_input_chars_per_word === "number" &&
    typeof m.unk_token === "string"
  );
}

/**
 * Replaces `model`'s encode with the same greedy longest-match-first, its tries bounded by
 * the vocabulary's longest token. The library tries every end from the word's own, so a word
 * of rare letters (each a piece of its own) cost its length squared in substrings: 178 words
 * of 100 such letters took 0.7 s of the API's loop to count, where ordinary text of the same
 * length takes 6 ms. The pieces, the [UNK] of a word too long or with no match, are the same.
 * Called once the tokenizer has added its added tokens to the map.
 */
export function boundWordPiece(model: WordPieceModel): void {
  const prefix = model.config.continuing_subword_prefix;
  const prefixed = String(prefix);
  let whole = 0;
  let piece = 0;
  for (const token of model.tokens_to_ids.keys()) {
    const length = codePoints(token);
    whole = Math.max(whole, length);
    if (token.startsWith(prefixed)) piece = Math.max(piece, length - codePoints(prefixed));
  }
  const ids = model.tokens_to_ids;
  model.encode = (words) => {
    const out: string[] = [];
    for (const word of words) {
      // where each code point starts, in UTF-16 units
      const starts: number[] = [];
      for (let unit = 0; unit < word.length; ) {
        starts.push(unit);
        unit += (word.codePointAt(unit) ?? 0) > 0xffff ? 2 : 1;
      }
      const chars = starts.length;
      starts.push(word.length);
      if (chars > model.max_input_chars_per_word) {
        out.push(model.unk_token);
        continue;
      }
      const pieces: string[] = [];
      let bad = false;
      for (let start = 0; start < chars; ) {
        let end = Math.min(chars, start + (start === 0 ? whole : piece));
        let found: string | undefined;
        for (; start < end; end--) {
          const sub = word.slice(starts[start], starts[end]);
          const candidate = start > 0 ? prefix + sub : sub;
          if (ids.has(candidate)) {
            found = candidate;
            break;
          }
        }
        if (found === undefined) {
          bad = true;
          break;
        }
        pieces.push(found);
        start = end;
      }
      if (bad) out.push(model.unk_token);
      else out.push(...pieces);
    }
    return out;
  };
}

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
