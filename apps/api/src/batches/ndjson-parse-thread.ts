// The body of the NDJSON parse thread (see NdjsonParser): parses each segment it is sent and
// hands the packed rows back without a copy.
import { parentPort } from "node:worker_threads";
import { parseRows, type RowsSpec } from "./ndjson-rows.js";

interface Request {
  id: number;
  bytes: Uint8Array;
  spec: RowsSpec;
}

parentPort?.on("message", ({ id, bytes, spec }: Request) => {
  try {
    const parsed = parseRows(bytes, spec);
    // the rows' buffer is theirs alone: it moves to the other thread, not copied
    parentPort?.postMessage({ id, parsed }, [parsed.rows.buffer as ArrayBuffer]);
  } catch (err) {
    parentPort?.postMessage({ id, failure: (err as Error).message });
  }
});
