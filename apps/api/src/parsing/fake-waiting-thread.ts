// A thread body for interactive-load.test.ts: says it started, then waits as the parse thread
// does (`yieldToInteractive` on the shared count it is given) and says how long it waited.
import { parentPort, workerData } from "node:worker_threads";
import { yieldToInteractive } from "./interactive-load.js";

parentPort?.postMessage("waiting");
parentPort?.postMessage(yieldToInteractive(workerData as SharedArrayBuffer, 5_000));
