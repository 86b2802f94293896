import { FerryError } from "@ferry/protocol";
import { BATCH_ENDPOINTS, endpointOf } from "../http/batch-endpoints.js";
import { packLines, plainFeatures } from "../http/packed-lines.js";

/** OpenAI's bound on a custom_id is not published; this keeps one line's id reasonable. */
const MAX_CUSTOM_ID_CHARS = 512;

/** What a batch input line says beside its body: its id and the route it runs on. */
export interface InputLine {
  customId: string;
  url: string;
  body: object;
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
  if (
    typeof custom_id !== "string" ||
    custom_id === "" ||
    characters(custom_id) > MAX_CUSTOM_ID_CHARS
  )
    throw invalid(line, `needs a custom_id: a string of 1-${MAX_CUSTOM_ID_CHARS} characters`);
  if (method !== "POST") throw invalid(line, 'needs method "POST"');
  if (typeof url !== "string" || endpointOf(url) === undefined)
    throw invalid(line, `has url ${JSON.stringify(url)}; one of ${BATCH_ENDPOINTS.join(", ")}`);
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw invalid(line, "needs a body: the request's JSON object");
  return { customId: custom_id, url, body };
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
  /** The lines packed (`packLines`), when they are all plain predict lines. */
  packed?: Uint8Array;
}

/** Characters (code points) of `text`, as the limit says: an emoji is one, not two. */
function characters(text: string): number {
  if (text.length <= MAX_CUSTOM_ID_CHARS) return text.length;
  let n = 0;
  for (const _ of text) n++;
  return n;
}

// strict: bytes that are not UTF-8 are refused, not turned into U+FFFD (a custom_id would no
// longer match the file's bytes, and two that differ only there would be one); a byte order
// mark is kept for the line loop, which drops one at the start of any line, as a run does
// (the decoder alone dropped it only at the start of each stored chunk)
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The number of the first line of `bytes` that is not UTF-8 (the lines are whole). */
function firstNotUtf8(bytes: Uint8Array, firstLine: number): number {
  let start = 0;
  for (let line = firstLine; start < bytes.length; line++) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    try {
      decoder.decode(bytes.subarray(start, end));
    } catch {
      return line;
    }
    start = end + 1;
  }
  return firstLine;
}

/** Checks each line of `bytes` (whole lines), the first of them line `firstLine` of the file. */
export function checkInputLines(bytes: Uint8Array, firstLine: number): CheckedLines {
  const checked: CheckedLines = { customIds: [], urls: [], numbers: [], seen: 0 };
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    const line = firstNotUtf8(bytes, firstLine);
    // the lines before it are counted as seen (and checked by nobody: the upload is refused)
    checked.seen = line - firstLine;
    checked.problem = invalid(line, "is not valid UTF-8").message;
    return checked;
  }
  /** The lines' features while every line so far is a plain predict line. */
  let features: number[][] | undefined = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    let line = text.slice(start, end);
    if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    start = end + 1;
    const number = firstLine + checked.seen;
    checked.seen++;
    if (line.trim() === "") continue;
    try {
      const { customId, url, body } = checkInputLine(line, number);
      if (features) {
        const plain = plainFeatures(url, body);
        if (plain) features.push(plain);
        else features = undefined;
      }
      checked.customIds.push(customId);
      checked.urls.push(url);
      checked.numbers.push(number);
    } catch (err) {
      checked.problem = (err as Error).message;
      return checked;
    }
  }
  if (features && features.length > 0) {
    const packed = packLines(checked.customIds, checked.urls, features, bytes.byteLength);
    if (packed) checked.packed = packed;
  }
  return checked;
}

function invalid(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `line ${line} ${problem}`);
}
