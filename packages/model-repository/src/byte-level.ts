/**
 * GPT-2's byte-level alphabet read backwards: the byte each character of a byte-level BPE
 * vocabulary stands for (bytes that print as themselves, then the rest from U+0100 on, in
 * order), so that a token's exact bytes are known, part of a UTF-8 character included.
 */
const BYTE_OF: ReadonlyMap<string, number> = (() => {
  const prints = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  const map = new Map<string, number>();
  let next = 256;
  for (let b = 0; b < 256; b++) map.set(String.fromCharCode(prints(b) ? b : next++), b);
  return map;
})();

/** The bytes a byte-level piece spells, or undefined where a character is not in the alphabet. */
export function byteLevelBytes(piece: string): number[] | undefined {
  const bytes: number[] = [];
  for (const c of piece) {
    const b = BYTE_OF.get(c);
    if (b === undefined) return undefined;
    bytes.push(b);
  }
  return bytes;
}
