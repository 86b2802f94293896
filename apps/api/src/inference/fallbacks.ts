import type { ModelConfig } from "@ferry/protocol";
import { FerryError } from "@ferry/protocol";

/** Sources a predict answer can come from. */
export type AnswerSource = "model" | "cache" | "fallback_cache" | "fallback_default";

/**
 * The one failure a fallback covers: the model ran on a worker and failed. A model still
 * starting or scaled to zero is not one (the request waits for a worker within its deadline),
 * and neither are a passed deadline (504), Redis being down (503), a full queue or bad input:
 * each of those has an honest answer of its own, and a made-up prediction is never one.
 */
export function isModelFailure(err: unknown): boolean {
  return err instanceof FerryError && err.code === "MODEL_ERROR";
}

export function fallbackEnabled(config: ModelConfig): boolean {
  return config.fallback?.enabled === true;
}
