import { createHash } from "node:crypto";
import type { OpenAiBatchStatus } from "@ferry/transport";

// The lines an OpenAI batch's files hold, as its runner writes them: their ids, stable
// whoever writes them, and the line of a request that never ran.

/** An input line as the upload checked it. */
export interface ParsedLine {
  custom_id: string;
  url: string;
  body: unknown;
}

/** The batches whose line ids were made last, and the hash each ids its lines by. */
const lineIdPrefixes = new Map<string, string>();

/**
 * A line's id in the batch's files: the same whoever answers it, unique in the batch (its
 * index) and apart from other batches' (a hash of the batch's id, made once per batch: a
 * hash per line was a twentieth of a predict batch's run).
 */
export function lineId(batch: string, index: number): string {
  let prefix = lineIdPrefixes.get(batch);
  if (prefix === undefined) {
    prefix = createHash("sha256").update(batch).digest("hex").slice(0, 20);
    if (lineIdPrefixes.size >= 256) lineIdPrefixes.clear();
    lineIdPrefixes.set(batch, prefix);
  }
  return `batch_req_${prefix}${index.toString(16).padStart(12, "0")}`;
}

/**
 * What a batch's answers are held as in its owner's file storage while it runs (the output
 * and error files take its place once written): the same whoever runs it.
 */
export function answersHoldId(batch: string): string {
  return `${batch}:answers`;
}

/** The id of a batch's output or error file: the same however often it is written. */
export function fileIdFor(batch: string, kind: string): string {
  return `file-${createHash("sha256").update(`${batch}:${kind}`).digest("hex").slice(0, 32)}`;
}

/**
 * An answered line as the output or error file has it: OpenAI's fields in OpenAI's order,
 * `body` the route's answer (JSON.stringify's text of a whole line, at a part of its cost).
 */
export function answerLine(
  id: string,
  customId: string,
  status: number,
  requestId: string,
  body: unknown,
): string {
  return answerLineOf(id, customId, status, requestId, JSON.stringify(body) ?? "null");
}

/** `answerLine` of a body already JSON. */
export function answerLineOf(
  id: string,
  customId: string,
  status: number,
  requestId: string,
  bodyJson: string,
): string {
  return `{"id":"${id}","custom_id":${JSON.stringify(customId)},"response":{"status_code":${status},"request_id":"${requestId}","body":${bodyJson}},"error":null}`;
}

/** The error file's line for a line the batch never ran (cancelled, or out of its window). */
export function notRun(
  batch: string,
  index: number,
  raw: string,
  ending: OpenAiBatchStatus,
): string {
  const { custom_id } = parseLine(raw) as { custom_id: string };
  const error =
    ending === "cancelled"
      ? { code: "batch_cancelled", message: "This request was not run: its batch was cancelled." }
      : ending === "failed"
        ? { code: "batch_failed", message: "This request was not run: its batch failed." }
        : {
            code: "batch_expired",
            message: "This request could not be executed before the completion window expired.",
          };
  return JSON.stringify({ id: lineId(batch, index), custom_id, response: null, error });
}

/**
 * A stored line, checked at upload. A byte order mark before it (an editor's) was dropped by
 * the upload's decoder, which reads each line alone; a stored chunk is read whole.
 */
export function parseLine(raw: string): unknown {
  return JSON.parse(raw.charCodeAt(0) === 0xfeff ? raw.slice(1) : raw);
}
