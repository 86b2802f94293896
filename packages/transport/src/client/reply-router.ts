import { type InferReply, type RowResult, WIRE_VERSION } from "@ferry/protocol";
import type { Redis } from "ioredis";
import type { ChannelMux } from "../shared/channel-mux.js";

interface Waiter {
  jobId: string | undefined;
  resolve: (result: RowResult) => void;
}

/**
 * One subscriber connection per API process, demultiplexing every answer addressed to this
 * process by row id. A subscription per request would cost two round trips each; this costs
 * none.
 */
export class ReplyRouter {
  private readonly waiters = new Map<string, Waiter>();
  private readonly ready: Promise<void>;

  constructor(
    subscriber: Redis,
    mux: ChannelMux,
    readonly channel: string,
    /** Called after a reconnect with the jobs whose answers may have been missed meanwhile. */
    private readonly onResubscribed: (jobIds: string[]) => void,
  ) {
    let first = true;
    subscriber.on("ready", () => {
      if (first) {
        first = false;
        return;
      }
      // ioredis re-subscribes by itself; whatever was published in the gap is recovered here.
      const jobs = new Set<string>();
      for (const w of this.waiters.values()) if (w.jobId) jobs.add(w.jobId);
      if (jobs.size > 0) this.onResubscribed([...jobs]);
    });
    this.ready = mux.listen(channel, (message) => this.deliver(message)).then(() => undefined);
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  /** Waits for the answer to row `rid`; the caller owns timeouts and calls `forget`. */
  wait(rid: string): Promise<RowResult> {
    return new Promise((resolve) => this.waiters.set(rid, { jobId: undefined, resolve }));
  }

  /** Records which job carries `rid`, for recovery after a reconnect. */
  assign(rid: string, jobId: string): void {
    const waiter = this.waiters.get(rid);
    if (waiter) waiter.jobId = jobId;
  }

  get waiting(): number {
    return this.waiters.size;
  }

  /** Resolves the waiters of a reply; rows nobody waits for any more (timed out) are dropped. */
  deliverReply(reply: InferReply): void {
    for (const result of reply.results) this.settle(result.rid, result);
  }

  /** Answers one row, once: later answers for it (a retried job's, say) are ignored. */
  settle(rid: string, result: RowResult): void {
    const waiter = this.waiters.get(rid);
    if (!waiter) return;
    this.waiters.delete(rid);
    waiter.resolve(result);
  }

  private deliver(message: string): void {
    let reply: InferReply;
    try {
      reply = JSON.parse(message) as InferReply;
    } catch {
      return;
    }
    if (reply.v !== WIRE_VERSION) return;
    this.deliverReply(reply);
  }
}
