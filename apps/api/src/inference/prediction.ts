import { classify } from "./classify.js";
import type { AnswerSource } from "./fallbacks.js";

/** What a classifier's predict answers. */
export interface Prediction {
  prediction: number;
  confidence: number;
  latency_ms: number;
  model_version: string;
  source: AnswerSource;
  /** Every class's probability (absent from a fallback's default answer). */
  scores?: number[];
}

/** A model's answer from its logits: the class, its probability, and every class's. */
export function modelPrediction(
  logits: readonly number[],
  version: string,
  latencyMs: number,
): Prediction {
  const { prediction, confidence, scores } = classify(logits);
  return {
    prediction,
    confidence,
    latency_ms: latencyMs,
    model_version: version,
    source: "model",
    scores,
  };
}
