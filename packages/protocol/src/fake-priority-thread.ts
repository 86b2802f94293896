// A thread body for thread-priority.test.ts: lowers its own priority as asked (workerData),
// then says its thread id and whether it was applied, and stays alive until terminated so that
// its /proc entry can be read.
import { readlinkSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { lowerThreadPriority } from "./thread-priority.js";

const applied = lowerThreadPriority(workerData as number);
const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
parentPort?.postMessage({ tid, applied });
parentPort?.on("message", () => {});
