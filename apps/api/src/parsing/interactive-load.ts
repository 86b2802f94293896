import type { IncomingMessage, ServerResponse } from "node:http";

/** Routes whose requests are offline work themselves: uploads, batches, their results. */
const OFFLINE_PREFIXES = ["/v1/batches", "/v1/files"];

/**
 * How many interactive requests the API is answering, in memory the parse thread reads too:
 * while there are any, it waits before each piece of offline work (`yieldToInteractive`),
 * so that a large upload's parsing leaves the cores to the requests a caller waits on. A
 * request counts from its arrival until its answer is sent or its connection closes.
 */
export class InteractiveLoad {
  /** One Int32: the requests in flight. */
  readonly shared = new SharedArrayBuffer(4);
  private readonly count = new Int32Array(this.shared);

  /** Counts `req` in until `res` closes, unless its route is offline work. */
  watch(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? "";
    if (OFFLINE_PREFIXES.some((prefix) => url.startsWith(prefix))) return;
    Atomics.add(this.count, 0, 1);
    // one listener for every request, not a closure each: a response closes once
    res.on("close", this.closed);
  }

  private readonly closed = (): void => {
    if (Atomics.sub(this.count, 0, 1) === 1) Atomics.notify(this.count, 0);
  };

  get size(): number {
    return Atomics.load(this.count, 0);
  }
}

/**
 * On the parse thread: waits while interactive requests are in flight (`InteractiveLoad`), at
 * most `mostMs`, and returns how long it waited. Blocking is this thread's to do: it does
 * nothing else meanwhile, and the API's loop is another thread.
 */
export function yieldToInteractive(shared: SharedArrayBuffer, mostMs: number): number {
  const count = new Int32Array(shared);
  const started = performance.now();
  for (;;) {
    const open = Atomics.load(count, 0);
    const left = mostMs - (performance.now() - started);
    if (open <= 0 || left <= 0) break;
    // woken when the count reaches 0, or when it changes and is looked at again
    Atomics.wait(count, 0, open, left);
  }
  return performance.now() - started;
}
