import type { CompletionRequest } from "./schemas.js";

/** A completion request's prompts, each text or token ids (OpenAI's four shapes of `prompt`). */
export function promptsOf(prompt: CompletionRequest["prompt"]): Array<string | number[]> {
  if (typeof prompt === "string") return [prompt];
  // a list of numbers is one prompt's token ids; any other list is a list of prompts
  if (typeof prompt[0] === "number") return [prompt as number[]];
  return prompt as Array<string | number[]>;
}
