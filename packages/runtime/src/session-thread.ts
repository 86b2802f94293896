import { parentPort, workerData } from "node:worker_threads";
import { InProcessSession } from "./in-process-session.js";
import type { SessionOptions, TensorMap } from "./tensor.js";
import type { BatchOutcome, ThreadReply, ThreadRequest } from "./thread-messages.js";

// Body of one ModelRuntime instance: owns a session so that session.run never blocks the
// worker's main event loop (where BullMQ renews its job locks).
const port = parentPort;
if (!port) throw new Error("session-thread must run in a worker thread");
const { path, options } = workerData as { path: string; options: SessionOptions };

const post = (reply: ThreadReply, transfer: ArrayBuffer[] = []) =>
  port.postMessage(reply, transfer);

InProcessSession.load(path, options).then(
  (session) => {
    post({ type: "ready", graph: session.graph });
    port.on("message", (msg: ThreadRequest) => {
      if (msg.type === "close") {
        void session.release().finally(() => port.close());
        return;
      }
      if (msg.type === "runMany") {
        void runEach(session, msg.batches).then((outcomes) => {
          const transfer = outcomes.flatMap((o) =>
            "outputs" in o ? Object.values(o.outputs).map((t) => t.data.buffer as ArrayBuffer) : [],
          );
          post({ type: "results", id: msg.id, outcomes }, transfer);
        });
        return;
      }
      session.run(msg.feeds).then(
        (outputs: TensorMap) => {
          const transfer = Object.values(outputs).map((t) => t.data.buffer as ArrayBuffer);
          post({ type: "result", id: msg.id, outputs }, transfer);
        },
        (err: unknown) => post({ type: "error", id: msg.id, message: errorMessage(err) }),
      );
    });
  },
  (err: unknown) => post({ type: "load-error", message: errorMessage(err) }),
);

/** Runs the batches one after another; one that fails fails alone. */
async function runEach(session: InProcessSession, batches: TensorMap[]): Promise<BatchOutcome[]> {
  const outcomes: BatchOutcome[] = [];
  for (const feeds of batches) {
    try {
      outcomes.push({ outputs: await session.run(feeds) });
    } catch (err) {
      outcomes.push({ error: errorMessage(err) });
    }
  }
  return outcomes;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
