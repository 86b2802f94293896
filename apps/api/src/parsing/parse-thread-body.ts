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
import type { ParseRequest, ParseThreadData } from "./parse-thread.js";

// an upload's parsing had taken a core from the API's loop and its worker: interactive
// predicts beside a 20,000-row NDJSON post waited 2-3x longer in the API and the worker's queue
lowerThreadPriority((workerData as ParseThreadData | undefined)?.nice ?? 0);

parentPort?.on("message", (request: ParseRequest) => {
  const { id } = request;
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
      // packed lines are a buffer of their own: they move
      const moved = checked.packed ? [checked.packed.buffer as ArrayBuffer] : [];
      parentPort?.postMessage({ id, result: checked }, moved);
    }
  } catch (err) {
    parentPort?.postMessage({ id, failure: (err as Error).message });
  }
});
