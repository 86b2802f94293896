/** A set of a vocabulary's token ids, one bit each: a 50,000-token vocabulary in 6 KB. */
export class TokenSet {
  private readonly bits: Uint32Array;

  constructor(readonly size: number) {
    this.bits = new Uint32Array((size + 31) >>> 5);
  }

  get bytes(): number {
    return this.bits.byteLength;
  }

  add(id: number): void {
    if (id >= 0 && id < this.size)
      this.bits[id >>> 5] = (this.bits[id >>> 5] ?? 0) | (1 << (id & 31));
  }

  /** Every logit of a token outside the set to minus infinity. */
  keepIn(logits: Float32Array): void {
    const words = this.bits.length;
    for (let w = 0; w < words; w++) {
      const word = this.bits[w] ?? 0;
      if (word === FULL) continue;
      const from = w << 5;
      const end = Math.min(logits.length, from + 32);
      if (word === 0) logits.fill(Number.NEGATIVE_INFINITY, from, end);
      else
        for (let id = from; id < end; id++)
          if (((word >>> (id & 31)) & 1) === 0) logits[id] = Number.NEGATIVE_INFINITY;
    }
    if (logits.length > this.size) logits.fill(Number.NEGATIVE_INFINITY, this.size);
  }
}

/** A word of 32 set bits, as a Uint32Array reads it. */
const FULL = 0xffffffff;
