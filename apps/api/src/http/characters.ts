/**
 * Characters of `text` as a limit in characters means them: code points (an emoji is one, not
 * two UTF-16 units). Counted one by one only where the units are more than `limit`, of which
 * they are at least as many.
 */
export function characters(text: string, limit = 0): number {
  if (text.length <= limit) return text.length;
  let n = 0;
  for (const _ of text) n++;
  return n;
}
