import { FerryError } from "@ferry/protocol";
import { BATCH_ENDPOINTS, endpointOf } from "../http/batch-endpoints.js";
import { characters } from "../http/characters.js";
import { type PackedChunk, packLines, plainFeatures } from "../http/packed-lines.js";
import { PredictLineScanner, type ScannedValues } from "./predict-line-scan.js";

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
    characters(custom_id, MAX_CUSTOM_ID_CHARS) > MAX_CUSTOM_ID_CHARS
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
  packed?: PackedChunk;
}

// strict: bytes that are not UTF-8 are refused, not turned into U+FFFD (a custom_id would no
// longer match the file's bytes, and two that differ only there would be one); a byte order
// mark is kept for the line loop, which drops one at the start of any line, as a run does
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const NEWLINE = 0x0a;
const PREDICT = "/v1/models/{model}/predict";

const scanner = new PredictLineScanner();

/**
 * The values a chunk's lines hold, kept from chunk to chunk and grown as needed: a fresh
 * array a chunk (a MiB for a chunk of MNIST lines) cost more in its pages' first touch than
 * the scan that filled it. Only `packLines`' copy leaves `checkInputLines`. A chunk of one
 * line longer than SCRATCH_MOST allows gets an array of its own, not kept.
 */
let scratch = new Float32Array(0);
const SCRATCH_MOST = 1 << 20;

/**
 * Checks each line of `bytes` (whole lines), the first of them line `firstLine` of the file;
 * the first line that fails is the chunk's problem. A plain predict line is read by the
 * scanner (predict-line-scan.ts) with the same outcome as JSON.parse and the checks below,
 * any other line as JSON; a chunk of plain predict lines is packed too (packed-lines.ts).
 */
export function checkInputLines(bytes: Uint8Array, firstLine: number): CheckedLines {
  const checked: CheckedLines = { customIds: [], urls: [], numbers: [], seen: 0 };
  // a JSON number takes a byte and its comma another: no line holds more values than this
  const most = Math.ceil(bytes.length / 2) + 1;
  if (scratch.length < most && most <= SCRATCH_MOST) scratch = new Float32Array(most);
  const out: ScannedValues = {
    values: most <= SCRATCH_MOST ? scratch : new Float32Array(most),
    length: 0,
  };
  /** Each line's number of features, while every line so far is a plain predict line. */
  let widths: number[] | undefined = [];
  /** Whether a url is predict's, as endpointOf says: a file's lines name a few urls. */
  const predicts = new Map<string, boolean>();
  const isPredict = (url: string) => {
    let predict = predicts.get(url);
    if (predict === undefined) {
      predict = endpointOf(url)?.endpoint === PREDICT;
      predicts.set(url, predict);
    }
    return predict;
  };
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(NEWLINE, start);
    if (end < 0) end = bytes.length;
    const from = start;
    start = end + 1;
    const number = firstLine + checked.seen;
    checked.seen++;
    const scanned = scanner.scan(bytes, from, end, out);
    if (
      scanned &&
      scanned.customId !== "" &&
      characters(scanned.customId) <= MAX_CUSTOM_ID_CHARS &&
      isPredict(scanned.url)
    ) {
      checked.customIds.push(scanned.customId);
      checked.urls.push(scanned.url);
      checked.numbers.push(number);
      widths?.push(scanned.width);
      continue;
    }
    if (scanned) out.length -= scanned.width;
    let line: string;
    try {
      line = decoder.decode(bytes.subarray(from, end));
    } catch {
      // the lines before it are counted as seen (and checked by nobody: the upload is refused)
      checked.seen--;
      checked.problem = invalid(number, "is not valid UTF-8").message;
      return checked;
    }
    if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    if (line.trim() === "") continue;
    try {
      const { customId, url, body } = checkInputLine(line, number);
      const plain = widths && plainFeatures(url, body);
      if (plain) {
        out.values.set(plain, out.length);
        out.length += plain.length;
        widths?.push(plain.length);
      } else widths = undefined;
      checked.customIds.push(customId);
      checked.urls.push(url);
      checked.numbers.push(number);
    } catch (err) {
      checked.problem = (err as Error).message;
      return checked;
    }
  }
  if (widths && widths.length > 0) {
    const values = out.values.subarray(0, out.length);
    const packed = packLines(checked.customIds, checked.urls, values, widths, bytes.byteLength);
    if (packed) checked.packed = packed;
  }
  return checked;
}

function invalid(line: number, problem: string): FerryError {
  return new FerryError("INVALID_INPUT", `line ${line} ${problem}`);
}
