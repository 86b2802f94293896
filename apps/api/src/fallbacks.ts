import type { ModelConfig } from "@ferry/protocol";
import { FerryError } from "@ferry/protocol";

/** Sources a predict answer can come from. */
export type AnswerSource = "model" | "cache" | "fallback_cache" | "fallback_default";

/** Failures of the model path that a fallback may cover; bad input never is one. */
export function isModelPathFailure(err: unknown): boolean {
  return (
    err instanceof FerryError &&
    ["MODEL_ERROR", "DEADLINE_EXCEEDED", "UNAVAILABLE", "INTERNAL"].includes(err.code)
  );
}

export function fallbackEnabled(config: ModelConfig): boolean {
  return config.fallback?.enabled === true;
}
