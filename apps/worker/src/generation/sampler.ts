import type { SamplingParams } from "@ferry/protocol";
import { topIndices } from "@ferry/runtime";

/**
 * sfc32, a small seeded PRNG with 128 bits of state, so one sequence's draws depend on its
 * seed alone: both halves of a 64-bit seed are state of their own (with 32 bits of state,
 * seeds equal in their low 32 bits, or mixed to the same 32, drew the same text).
 */
export function seededRandom(seed: number): () => number {
  let a = 0x9e3779b9;
  let b = seed >>> 0;
  let c = Math.floor(seed / 4_294_967_296) >>> 0;
  let d = 1;
  const next = () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4_294_967_296;
  };
  // the first draws of nearby seeds are alike: they are left out
  for (let k = 0; k < 15; k++) next();
  return next;
}

/**
 * Picks the next token from last-position logits: greedy at temperature 0, else softmax at
 * `temperature`, less the tokens under `min_p` times the likeliest one's probability, over
 * the `top_k` most likely tokens, cut to the smallest set whose mass reaches `top_p`, drawn
 * with the sequence's own generator (one draw per token).
 */
export function sample(
  logits: Float32Array,
  params: Pick<SamplingParams, "temperature" | "top_k" | "top_p" | "min_p">,
  random: () => number,
): number {
  if (params.temperature === 0) return argmax(logits);
  const n = logits.length;
  const k = params.top_k > 0 && params.top_k < n ? params.top_k : n;
  const minP = params.min_p ?? 0;
  // The common case needs no ranking: a draw over the whole softmax, in vocabulary order.
  if (k === n && params.top_p >= 1) return drawAll(logits, params.temperature, minP, random);
  const top = topIndices(logits, k);
  const max = logits[top[0] ?? 0] ?? 0;
  // a weight is a probability over the likeliest one's, so min_p cuts the ranked tail
  const weights = top
    .map((id) => Math.exp(((logits[id] ?? 0) - max) / params.temperature))
    .filter((w, i) => i === 0 || w >= minP);
  const total = weights.reduce((s, w) => s + w, 0);
  let kept = weights.length;
  if (params.top_p < 1) {
    let mass = 0;
    for (let i = 0; i < weights.length; i++) {
      mass += (weights[i] ?? 0) / total;
      if (mass >= params.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  const keptTotal = weights.slice(0, kept).reduce((s, w) => s + w, 0);
  let r = random() * keptTotal;
  let last = 0;
  for (let i = 0; i < kept; i++) {
    const w = weights[i] ?? 0;
    if (w === 0) continue;
    if (r < w) return top[i] ?? 0;
    r -= w;
    last = i;
  }
  // rounding left a sliver of r: the last token with any weight (the ranked tail may hold
  // barred ones, weight 0, which the last place had drawn)
  return top[last] ?? 0;
}

let scratch = new Float64Array(0);

function drawAll(
  logits: Float32Array,
  temperature: number,
  minP: number,
  random: () => number,
): number {
  const n = logits.length;
  if (scratch.length < n) scratch = new Float64Array(n);
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[i] ?? max);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(((logits[i] ?? max) - max) / temperature);
    // the likeliest token's weight is 1: min_p compares with it directly
    const w = e < minP ? 0 : e;
    scratch[i] = w;
    total += w;
  }
  let r = random() * total;
  let last = 0;
  for (let i = 0; i < n; i++) {
    const w = scratch[i] ?? 0;
    if (w === 0) continue;
    if (r < w) return i;
    r -= w;
    last = i;
  }
  // rounding left a sliver of r: the last token with any weight
  return last;
}

export function argmax(xs: Float32Array): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if ((xs[i] ?? 0) > (xs[best] ?? 0)) best = i;
  return best;
}
