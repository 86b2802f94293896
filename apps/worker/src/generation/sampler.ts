import type { SamplingParams } from "@ferry/protocol";

/** mulberry32: a small seeded PRNG, so one sequence's draws depend on its seed alone. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * Picks the next token from last-position logits: greedy at temperature 0, else softmax at
 * `temperature` over the `top_k` most likely tokens, cut to the smallest set whose mass
 * reaches `top_p`, drawn with the sequence's own generator.
 */
export function sample(
  logits: Float32Array,
  params: Pick<SamplingParams, "temperature" | "top_k" | "top_p">,
  random: () => number,
): number {
  if (params.temperature === 0) return argmax(logits);
  const order = Array.from(logits.keys()).sort((a, b) => (logits[b] ?? 0) - (logits[a] ?? 0));
  const k = params.top_k > 0 ? Math.min(params.top_k, order.length) : order.length;
  const top = order.slice(0, k);
  const max = logits[top[0] ?? 0] ?? 0;
  const weights = top.map((id) => Math.exp(((logits[id] ?? 0) - max) / params.temperature));
  const total = weights.reduce((s, w) => s + w, 0);
  let kept = top.length;
  if (params.top_p < 1) {
    let mass = 0;
    for (let i = 0; i < top.length; i++) {
      mass += (weights[i] ?? 0) / total;
      if (mass >= params.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  const keptTotal = weights.slice(0, kept).reduce((s, w) => s + w, 0);
  let r = random() * keptTotal;
  for (let i = 0; i < kept; i++) {
    r -= weights[i] ?? 0;
    if (r <= 0) return top[i] ?? 0;
  }
  return top[kept - 1] ?? 0;
}

export function argmax(xs: Float32Array): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if ((xs[i] ?? 0) > (xs[best] ?? 0)) best = i;
  return best;
}
