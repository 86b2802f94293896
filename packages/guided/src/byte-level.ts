/**
 * GPT-2's byte-to-character table: every byte as a printable character, so that any token's
 * bytes (part of a UTF-8 character included) can be written as a string XGrammar's
 * `byte_level` vocabulary reads back to the same bytes.
 */
const BYTE_CHARS: string[] = (() => {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const chars: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) chars[b] = String.fromCodePoint(printable.includes(b) ? b : next++);
  return chars;
})();

/** A token's bytes as a byte-level piece. */
export function byteLevelPiece(bytes: readonly number[]): string {
  let out = "";
  for (const b of bytes) out += BYTE_CHARS[b] ?? "";
  return out;
}
