import type { Worker } from "node:worker_threads";
import { spawnThread } from "@ferry/protocol";
import type { ParsedRows, RowsSpec } from "./ndjson-rows.js";

type Reply = { id: number; parsed: ParsedRows } | { id: number; failure: string };

/**
 * NDJSON batch rows parsed on a thread of their own: the API's event loop only cuts the body
 * into segments of whole lines and queues the packed rows that come back, so an upload's
 * parsing runs beside its receiving (and beside every other request the API serves) instead
 * of on the same loop. One thread per API process, started on first use; segments of every
 * batch take their turn on it in the order they were sent.
 */
export class NdjsonParser {
  private thread: Worker | undefined;
  private next = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (rows: ParsedRows) => void; reject: (err: Error) => void }
  >();

  /** `bytes` (whole lines) parsed into rows as `spec` says; `bytes` moves to the thread. */
  parse(bytes: Uint8Array, spec: RowsSpec): Promise<ParsedRows> {
    const thread = this.started();
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      thread.postMessage({ id, bytes, spec }, [bytes.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    const thread = this.thread;
    this.thread = undefined;
    await thread?.terminate();
  }

  private started(): Worker {
    if (this.thread) return this.thread;
    // its heap holds two segments' lines and rows at a time: kept small, as the API's own is
    const thread = spawnThread(new URL("./ndjson-parse-thread.js", import.meta.url), undefined, {
      maxOldGenerationSizeMb: 48,
      maxYoungGenerationSizeMb: 16,
    });
    // an idle parser does not keep the process alive
    thread.unref();
    thread.on("message", (reply: Reply) => {
      const waiter = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (!waiter) return;
      if ("parsed" in reply) waiter.resolve(reply.parsed);
      else waiter.reject(new Error(`the NDJSON parse thread failed: ${reply.failure}`));
    });
    const lost = (err: Error) => {
      if (this.thread === thread) this.thread = undefined;
      for (const waiter of this.waiting.values()) waiter.reject(err);
      this.waiting.clear();
    };
    thread.on("error", lost);
    thread.on("exit", (code) => lost(new Error(`the NDJSON parse thread exited (${code})`)));
    this.thread = thread;
    return thread;
  }
}
