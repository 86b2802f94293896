// The body of the API's parse thread (see ParseThread): parses each piece of a body it is
// sent, or renders a chunk of answers, and hands the result back, packed rows and rendered
// lines without a copy.
import { parentPort, workerData } from "node:worker_threads";
import { decodeChunkOutput, lowerThreadPriority } from "@ferry/protocol";
import { renderAnswers } from "../batches/answer-plan.js";
import { parseJsonBatch } from "../batches/json-batch-body.js";
import { type ParsedRows, parseRows } from "../batches/ndjson-rows.js";
import { resultLines } from "../batches/result-lines.js";
import { type CheckedLines, checkInputLines } from "../files/input-lines.js";
import { classify } from "../inference/classify.js";
import { modelPrediction } from "../inference/prediction.js";
import { yieldToInteractive } from "./interactive-load.js";
import type { ParseRequest, ParseThreadData } from "./parse-thread.js";

const data = workerData as ParseThreadData | undefined;
lowerThreadPriority(data?.nice ?? 0);

/** The longest a piece waits for interactive requests to finish, in ms. */
const MOST_WAIT_MS = 50;
/**
 * A piece waits at most this many times as long as the last one took: under steady interactive
 * traffic offline work keeps a quarter of the thread (1x and 3x measured against no wait and
 * against the thread at nice 10: docs/benchmarks.md).
 */
const WAIT_PER_PIECE = 3;
/** How long the last piece took, in ms. */
let lastPieceMs = 0;

parentPort?.on("message", (request: ParseRequest) => {
  const { id } = request;
  // an upload's parsing had taken a core from the API's loop, the worker and Redis: interactive
  // predicts beside a 20,000-row NDJSON post waited 3-6x as long as alone
  if (data?.interactive)
    yieldToInteractive(data.interactive, Math.min(WAIT_PER_PIECE * lastPieceMs, MOST_WAIT_MS));
  const started = performance.now();
  try {
    if (request.kind === "rows") {
      const parsed: ParsedRows = parseRows(request.bytes, request.spec);
      // the rows' buffer is theirs alone: it moves to the other thread, not copied
      parentPort?.postMessage({ id, result: parsed }, [parsed.rows.buffer as ArrayBuffer]);
    } else if (request.kind === "json-batch") {
      const parsed = parseJsonBatch(request.bytes, request.fingerprintHead);
      // the features and widths are buffers of their own: they move
      parentPort?.postMessage({ id, result: parsed }, [
        parsed.values.buffer as ArrayBuffer,
        parsed.widths.buffer as ArrayBuffer,
      ]);
    } else if (request.kind === "result-lines") {
      const { bytes } = request;
      const out = decodeChunkOutput(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      const rendered = Buffer.from(resultLines(out, classify));
      // a buffer of its own moves; a short one is a slice of Buffer's pool, copied out first
      const owned =
        rendered.byteOffset === 0 && rendered.buffer.byteLength === rendered.byteLength
          ? rendered
          : new Uint8Array(rendered);
      parentPort?.postMessage({ id, result: owned }, [owned.buffer as ArrayBuffer]);
    } else if (request.kind === "answers") {
      const rendered = renderAnswers(request.plan, modelPrediction);
      const { encoded } = rendered;
      // a buffer of its own moves; a short one is a slice of Buffer's pool, copied out first
      const owned =
        encoded.byteOffset === 0 && encoded.buffer.byteLength === encoded.byteLength
          ? encoded
          : new Uint8Array(encoded);
      parentPort?.postMessage({ id, result: { ...rendered, encoded: owned } }, [
        owned.buffer as ArrayBuffer,
      ]);
    } else {
      const checked: CheckedLines = checkInputLines(request.bytes, request.firstLine);
      // packed lines are a buffer of their own (their rows and head views of it): it moves
      const moved = checked.packed ? [checked.packed.rows.buffer as ArrayBuffer] : [];
      parentPort?.postMessage({ id, result: checked }, moved);
    }
  } catch (err) {
    parentPort?.postMessage({ id, failure: (err as Error).message });
  }
  lastPieceMs = performance.now() - started;
});
