// Post-processing of classifier outputs lives in the API alone: workers return what the model
// computed, and every answer (live, async, batch) is turned into a prediction here.

/** The class, its probability, and every class's probability: a softmax of the logits. */
export function classify(logits: readonly number[]): {
  prediction: number;
  confidence: number;
  scores: number[];
} {
  let best = 0;
  for (let k = 1; k < logits.length; k++) if ((logits[k] ?? 0) > (logits[best] ?? 0)) best = k;
  const max = logits[best] ?? 0;
  const exp = logits.map((l) => Math.exp(l - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  const scores = exp.map((e) => e / sum);
  return { prediction: best, confidence: scores[best] ?? 0, scores };
}
