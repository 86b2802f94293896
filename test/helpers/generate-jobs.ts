import { type CompletionResult, type GenerateJob, WIRE_VERSION } from "@ferry/protocol";

/** A four-token completion of `prompt` for model `lm`, as a queue holds it. */
export function generateJob(prompt: string, version = "1"): GenerateJob {
  return {
    v: WIRE_VERSION,
    kind: "generate",
    model: "lm",
    version,
    prompt,
    params: { max_tokens: 4, temperature: 0, top_p: 1, top_k: 0, stop: [], ignore_eos: false },
    deadline: Date.now() + 600_000,
    accepted_at: Date.now(),
  };
}

/** What a handler that generates nothing answers. */
export const emptyCompletion: CompletionResult = {
  text: "",
  finish_reason: "length",
  usage: { prompt_tokens: 1, completion_tokens: 4, total_tokens: 5 },
  ttft_ms: 0,
};
