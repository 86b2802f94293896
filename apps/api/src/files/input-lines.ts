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

/** A chunk of whole lines of an input file, checked: what each line that is not blank says. */
export interface CheckedLines {
  customIds: string[];
  urls: string[];
  /** Each checked line's number in the file. */
  numbers: number[];
  /** Lines read, blank ones included, up to the problem if any. */
  seen: number;
  /** Why a line was refused (its number in the message); the lines before it are checked. */
  problem?: string;
}

const decoder = new TextDecoder();

/** Checks each line of `bytes` (whole lines), the first of them line `firstLine` of the file. */
export function checkInputLines(bytes: Uint8Array, firstLine: number): CheckedLines {
  const text = decoder.decode(bytes);
  const checked: CheckedLines = { customIds: [], urls: [], numbers: [], seen: 0 };
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    const number = firstLine + checked.seen;
    checked.seen++;
    if (line.trim() === "") continue;
    try {
      const { customId, url } = checkInputLine(line, number);
      checked.customIds.push(customId);
      checked.urls.push(url);
      checked.numbers.push(number);
    } catch (err) {
      checked.problem = (err as Error).message;
      return checked;
    }
  }
  return checked;
}

function invalid(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `line ${line} ${problem}`);
}
