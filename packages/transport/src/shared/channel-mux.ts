import { isCluster, type RedisClient } from "./connection.js";

type Listener = (message: string) => void;

/** The most often `onResubscribed` listeners are told, in ms. */
const RESUBSCRIBED_EVERY_MS = 250;

/**
 * How a channel is published: `broadcast` (PUBLISH: every node of a cluster relays it, for
 * what every process must hear) or `shard` (SPUBLISH, Redis 7: only the shard owning the
 * channel's slot carries it, for answers and job events addressed to one reader).
 */
export type ChannelKind = "broadcast" | "shard";

/**
 * One subscriber connection shared by everything in a process that listens: listeners are
 * kept per channel, and a channel is subscribed while it has at least one. On a cluster the
 * connection is a cluster client with a subscriber per primary for shard channels.
 */
export class ChannelMux {
  private readonly listeners = new Map<string, Set<Listener>>();
  /** Times the subscriptions were made: the first connection's, then each reconnection's. */
  private readies: number;

  constructor(private readonly subscriber: RedisClient) {
    const deliver = (channel: string, message: string) => {
      for (const listener of this.listeners.get(channel) ?? []) listener(message);
    };
    subscriber.on("message", deliver);
    subscriber.on("smessage", deliver);
    this.readies = !isCluster(subscriber) && subscriber.status === "ready" ? 1 : 0;
    // first of the event's listeners, so that each later one reads the count of this event
    subscriber.on(this.readyEvent, () => {
      this.readies++;
    });
  }

  /**
   * A standalone client re-subscribes before "ready"; a cluster's shard subscribers say
   * "subscribersReady" once they re-subscribed on the current slot map.
   */
  private get readyEvent(): string {
    return isCluster(this.subscriber) ? "subscribersReady" : "ready";
  }

  /**
   * Calls `listener` whenever subscriptions were made again after a lost connection (a
   * restart, a failover): whatever was published in between was missed. At most once per
   * `RESUBSCRIBED_EVERY_MS`, and always after the last time: while a shard is down, ioredis
   * rebuilds its shard subscribers (and says so) every few milliseconds, and each call sends
   * every open event stream back to its log.
   */
  onResubscribed(listener: () => void): void {
    let scheduled = false;
    let lastCall = Number.NEGATIVE_INFINITY;
    // told apart by count, not by which this listener saw first: it may be added after the
    // first connection is up
    this.subscriber.on(this.readyEvent, () => {
      if (this.readies <= 1) return;
      // one call still to come covers this resubscription too: it comes after it
      if (scheduled) return;
      scheduled = true;
      const wait = Math.max(0, lastCall + RESUBSCRIBED_EVERY_MS - performance.now());
      setTimeout(() => {
        scheduled = false;
        lastCall = performance.now();
        listener();
      }, wait);
    });
  }

  /** Listens on `channel`; resolves once Redis confirms the subscription. Returns the unsubscriber. */
  async listen(
    channel: string,
    listener: Listener,
    kind: ChannelKind = "broadcast",
  ): Promise<() => void> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    set.add(listener);
    if (kind === "shard") await this.subscriber.ssubscribe(channel);
    else await this.subscriber.subscribe(channel);
    return () => {
      const current = this.listeners.get(channel);
      current?.delete(listener);
      if (current?.size === 0) {
        this.listeners.delete(channel);
        const gone =
          kind === "shard"
            ? this.subscriber.sunsubscribe(channel)
            : this.subscriber.unsubscribe(channel);
        void gone.catch(() => undefined);
      }
    };
  }
}
