/**
 * What a UTF-8 character's first byte allows (RFC 3629): how many bytes the character has,
 * and the range its second byte must be in, so that no overlong form, surrogate or code point
 * past U+10FFFF is taken. Undefined: no character begins with this byte.
 */
export function utf8Lead(
  b: number,
): { size: number; second: readonly [number, number] } | undefined {
  if (b < 0x80) return { size: 1, second: [0, 0] };
  if (b >= 0xc2 && b <= 0xdf) return { size: 2, second: CONTINUATION };
  if (b === 0xe0) return { size: 3, second: [0xa0, 0xbf] };
  if (b === 0xed) return { size: 3, second: [0x80, 0x9f] };
  if (b >= 0xe1 && b <= 0xef) return { size: 3, second: CONTINUATION };
  if (b === 0xf0) return { size: 4, second: [0x90, 0xbf] };
  if (b >= 0xf1 && b <= 0xf3) return { size: 4, second: CONTINUATION };
  if (b === 0xf4) return { size: 4, second: [0x80, 0x8f] };
  return undefined;
}

/** Any byte after a character's first (past its second) is in this range. */
export const CONTINUATION = [0x80, 0xbf] as const;

/** Whether `b` may be byte `index` (1-based after the first) of a character that began with `lead`. */
export function utf8Follows(lead: number, index: number, b: number): boolean {
  const [lo, hi] = index === 1 ? (utf8Lead(lead)?.second ?? CONTINUATION) : CONTINUATION;
  return b >= lo && b <= hi;
}
