// The body of the API's parse thread (see ParseThread): parses each piece of a body it is
// sent and hands the result back, packed rows without a copy.
import { parentPort } from "node:worker_threads";
import { type ParsedRows, parseRows } from "../batches/ndjson-rows.js";
import { type CheckedLines, checkInputLines } from "../files/input-lines.js";
import type { ParseRequest } from "./parse-thread.js";

parentPort?.on("message", (request: ParseRequest) => {
  const { id } = request;
  try {
    if (request.kind === "rows") {
      const parsed: ParsedRows = parseRows(request.bytes, request.spec);
      // the rows' buffer is theirs alone: it moves to the other thread, not copied
      parentPort?.postMessage({ id, result: parsed }, [parsed.rows.buffer as ArrayBuffer]);
    } else {
      const checked: CheckedLines = checkInputLines(request.bytes, request.firstLine);
      parentPort?.postMessage({ id, result: checked });
    }
  } catch (err) {
    parentPort?.postMessage({ id, failure: (err as Error).message });
  }
});
