import { FerryError } from "@ferry/protocol";
import { z } from "@hono/zod-openapi";
import type { CompletionRequest } from "../openai/schemas.js";

/**
 * Triton's generate extension's request: the text, and the generation's settings either as
 * inputs beside it (TensorRT-LLM's ensemble: `max_tokens`, `stop_words`, `bad_words`...) or in
 * `parameters` (the vLLM backend's sampling parameters), `parameters` winning where both say.
 */
export const generateRequestSchema = z
  .object({
    id: z.string().optional(),
    text_input: z.string(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  })
  .catchall(z.unknown())
  .openapi("GenerateRequest");
export type GenerateRequest = z.infer<typeof generateRequestSchema>;

/** The settings a generate request may carry, and the completion field each becomes. */
const SETTINGS = [
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "min_tokens",
  "repetition_penalty",
  "frequency_penalty",
  "presence_penalty",
  "ignore_eos",
] as const;
/** Read by the route or here, not passed on as they are. */
const OWN = ["stop", "stop_words", "bad_words", "exclude_input_in_output", "stream"];

/** A word list as the two backends send one: a string or a list, empty entries meaning none. */
function words(value: unknown, name: string): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === "string" ? [value] : value;
  if (!Array.isArray(list) || list.some((w) => typeof w !== "string"))
    throw new FerryError("INVALID_INPUT", `${name} must be a string or a list of strings`);
  return (list as string[]).filter((w) => w !== "");
}

/**
 * A generate request as the completion it runs on `model`. The text comes back with its input
 * before it unless `exclude_input_in_output` is true (both backends' default). A setting this
 * server does not have is refused by name: Triton refuses an input the model lacks. `check` is
 * the completion request's own validation (the OpenAI protocol's, handed over by the route).
 */
export function completionOf(
  model: string,
  body: GenerateRequest,
  check: (raw: unknown) => CompletionRequest,
): CompletionRequest {
  const { id: _id, text_input, parameters, ...inputs } = body;
  // a setting's value in `parameters` wins, but a null there says nothing: spread over the
  // inputs, it had wiped out the same setting given beside text_input
  const settings: Record<string, unknown> = { ...inputs };
  for (const [key, value] of Object.entries(parameters ?? {}))
    if (value !== null || !(key in settings)) settings[key] = value;
  const unknown = Object.keys(settings).filter(
    (key) => !(SETTINGS as readonly string[]).includes(key) && !OWN.includes(key),
  );
  if (unknown.length > 0)
    throw new FerryError(
      "INVALID_INPUT",
      `unexpected generate setting '${unknown[0]}' (this server takes text_input, ${[...SETTINGS, ...OWN].join(", ")})`,
    );
  if (
    settings.exclude_input_in_output !== undefined &&
    typeof settings.exclude_input_in_output !== "boolean"
  )
    throw new FerryError("INVALID_INPUT", "exclude_input_in_output must be a boolean");
  const stop = [...words(settings.stop, "stop"), ...words(settings.stop_words, "stop_words")];
  const bad = words(settings.bad_words, "bad_words");
  return check({
    model,
    prompt: text_input,
    ...Object.fromEntries(
      SETTINGS.filter((k) => settings[k] !== undefined).map((k) => [k, settings[k]]),
    ),
    ...(stop.length > 0 ? { stop } : {}),
    ...(bad.length > 0 ? { bad_words: bad } : {}),
    echo: settings.exclude_input_in_output !== true,
  });
}

/** The response (or one streamed piece of it): the text, named as the model's output. */
export function generateResponse(
  body: GenerateRequest,
  model: string,
  version: string,
  text: string,
) {
  return {
    ...(body.id === undefined ? {} : { id: body.id }),
    model_name: model,
    model_version: version,
    text_output: text,
  };
}
