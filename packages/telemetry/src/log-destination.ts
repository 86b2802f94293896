import { outputGone } from "@ferry/protocol";
import pino from "pino";

/**
 * Standard output for a process's pino logger, each line written as it is logged, that goes
 * quiet once its terminal or pipe is gone. pino stops on EPIPE alone: a closed terminal's EIO
 * was an uncaught exception at the first line of the drain that closing it began (`npm start`'s
 * SIGHUP), and with lines still buffered at exit its flush retried the dead terminal for good,
 * holding the process. Written synchronously, nothing is left to flush at exit.
 */
export function logDestination(): pino.DestinationStream {
  const stream = pino.destination({ fd: 1, sync: true });
  stream.on("error", (err: unknown) => {
    if (!outputGone(err)) throw err;
    stream.write = () => true;
    stream.flushSync = () => {};
    stream.flush = () => {};
    stream.end = () => {};
  });
  return stream;
}
