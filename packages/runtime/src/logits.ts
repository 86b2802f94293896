/**
 * log(sum(exp(x))) over a row of logits, the max taken out first so that nothing overflows:
 * a token's log probability is its logit less this.
 */
export function logSumExp(logits: Float32Array): number {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i] ?? max);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp((logits[i] ?? max) - max);
  return max + Math.log(sum);
}

/** The `k` largest logits' ids, largest first (insertion into a short ranked list). */
export function topIndices(logits: Float32Array, k: number): number[] {
  if (k <= 0) return [];
  if (k * 8 > logits.length) {
    const order = Array.from(logits.keys());
    return order.sort((a, b) => (logits[b] ?? 0) - (logits[a] ?? 0)).slice(0, k);
  }
  const ids: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i] ?? 0;
    if (ids.length === k && v <= (logits[ids[k - 1] ?? 0] ?? 0)) continue;
    let at = ids.length === k ? k - 1 : ids.length;
    while (at > 0 && (logits[ids[at - 1] ?? 0] ?? 0) < v) {
      ids[at] = ids[at - 1] ?? 0;
      at--;
    }
    ids[at] = i;
  }
  return ids;
}
