/**
 * A chunk of an OpenAI batch's input answered whole (predict lines), as Redis keeps it: its
 * output file's lines and its error file's, each in the input's order, as two blocks of text
 * behind a header of their counts, so that the finalizer appends each block to its file as it
 * is rather than a line at a time.
 *
 * @example
 * const value = encodeChunkAnswers(['{"id":"a",...}'], []);
 * decodeChunkAnswers(value).ok; // { text: '{"id":"a",...}', lines: 1 }
 */
export function encodeChunkAnswers(ok: readonly string[], failed: readonly string[]): string {
  const okText = ok.join("\n");
  return `${ok.length} ${failed.length} ${okText.length}\n${okText}${failed.join("\n")}`;
}

/** A block of whole lines (no newline after the last) and how many there are. */
export interface LineBlock {
  text: string;
  lines: number;
}

export function decodeChunkAnswers(value: string): { ok: LineBlock; failed: LineBlock } {
  const end = value.indexOf("\n");
  const [ok, failed, okChars] = value.slice(0, end).split(" ").map(Number);
  if (end < 0 || ok === undefined || failed === undefined || okChars === undefined)
    throw new Error("a chunk's kept answers have no header");
  const body = end + 1;
  return {
    ok: { text: value.slice(body, body + okChars), lines: ok },
    failed: { text: value.slice(body + okChars), lines: failed },
  };
}
