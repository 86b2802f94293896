// OpenTelemetry's GenAI semantic conventions (gen_ai.*), the names Ferry's generation spans
// carry: written out because the package exports them from its unstable entry point only.
export const GEN_AI = {
  operationName: "gen_ai.operation.name",
  requestModel: "gen_ai.request.model",
  requestMaxTokens: "gen_ai.request.max_tokens",
  requestTemperature: "gen_ai.request.temperature",
  requestTopP: "gen_ai.request.top_p",
  requestSeed: "gen_ai.request.seed",
  responseId: "gen_ai.response.id",
  responseModel: "gen_ai.response.model",
  responseFinishReasons: "gen_ai.response.finish_reasons",
  usageInputTokens: "gen_ai.usage.input_tokens",
  usageOutputTokens: "gen_ai.usage.output_tokens",
  /** Ferry's own, where the conventions have none on spans. */
  timeToFirstTokenS: "ferry.gen_ai.time_to_first_token_s",
  timePerOutputTokenS: "ferry.gen_ai.time_per_output_token_s",
} as const;

/** The conventions' operation for a completion's format. */
export function genAiOperation(format: unknown): "chat" | "text_completion" {
  return format === "chat" ? "chat" : "text_completion";
}
