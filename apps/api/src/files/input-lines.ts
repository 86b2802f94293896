import { FerryError } from "@ferry/protocol";
import { BATCH_ENDPOINTS, endpointOf } from "../http/batch-endpoints.js";

/** OpenAI's bound on a custom_id is not published; this keeps one line's id reasonable. */
const MAX_CUSTOM_ID_CHARS = 512;

/** What a batch input line says beside its body: its id and the route it runs on. */
export interface InputLine {
  customId: string;
  url: string;
}

/**
 * One line of a batch input file, checked as OpenAI's Batch API has it:
 * `{"custom_id", "method": "POST", "url", "body"}`, the url one of the batch endpoints. Its
 * body is checked when it runs, by the route's own service, as that route would check it.
 */
export function checkInputLine(text: string, line: number): InputLine {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid(line, "is not valid JSON");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    throw invalid(line, "is not a JSON object");
  const { custom_id, method, url, body } = parsed as Record<string, unknown>;
  if (typeof custom_id !== "string" || custom_id === "" || custom_id.length > MAX_CUSTOM_ID_CHARS)
    throw invalid(line, `needs a custom_id: a string of 1-${MAX_CUSTOM_ID_CHARS} characters`);
  if (method !== "POST") throw invalid(line, 'needs method "POST"');
  if (typeof url !== "string" || endpointOf(url) === undefined)
    throw invalid(line, `has url ${JSON.stringify(url)}; one of ${BATCH_ENDPOINTS.join(", ")}`);
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw invalid(line, "needs a body: the request's JSON object");
  return { customId: custom_id, url };
}

function invalid(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `line ${line} ${problem}`);
}
