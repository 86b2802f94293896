import { type InferReply, type RowResult, WIRE_VERSION } from "@ferry/protocol";
import type { ChannelMux } from "../shared/channel-mux.js";

type Waiter = (result: RowResult) => void;

/**
 * One subscriber connection per API process, demultiplexing every answer addressed to this
 * process by row id. A subscription per request would cost two round trips each; this costs
 * none.
 */
export class ReplyRouter {
  private readonly waiters = new Map<string, Waiter>();
  private readonly ready: Promise<void>;

  constructor(
    mux: ChannelMux,
    readonly channel: string,
    /** Called after a reconnect: answers published meanwhile were missed. */
    private readonly onResubscribed: () => void,
  ) {
    // the mux re-subscribes by itself; whatever was published in the gap is recovered by the
    // owner (the rows still waiting are sent again; a second answer is ignored)
    mux.onResubscribed(() => {
      if (this.waiters.size > 0) this.onResubscribed();
    });
    this.ready = mux
      .listen(channel, (message) => this.deliver(message), "shard")
      .then(() => undefined);
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  /** Waits for the answer to row `rid`; the caller owns timeouts (settling it itself). */
  wait(rid: string): Promise<RowResult> {
    return new Promise((resolve) => this.waiters.set(rid, resolve));
  }

  /** Stops waiting for row `rid` (answered another way: from the cache). */
  forget(rid: string): void {
    this.waiters.delete(rid);
  }

  /** Answers one row, once: later answers for it (a claimed or resent group's) are ignored. */
  settle(rid: string, result: RowResult): void {
    const waiter = this.waiters.get(rid);
    if (!waiter) return;
    this.waiters.delete(rid);
    waiter(result);
  }

  private deliver(message: string): void {
    let reply: InferReply;
    try {
      reply = JSON.parse(message) as InferReply;
    } catch {
      return;
    }
    if (reply.v !== WIRE_VERSION) return;
    // rows nobody waits for any more (past their deadline, or answered already) are dropped
    for (const result of reply.results) this.settle(result.rid, result);
  }
}
