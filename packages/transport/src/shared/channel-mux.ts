import type { Redis } from "ioredis";

type Listener = (message: string) => void;

/**
 * One subscriber connection shared by everything in a process that listens: listeners are
 * kept per channel, and a channel is subscribed while it has at least one.
 */
export class ChannelMux {
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly subscriber: Redis) {
    subscriber.on("message", (channel: string, message: string) => {
      for (const listener of this.listeners.get(channel) ?? []) listener(message);
    });
  }

  /** Listens on `channel`; resolves once Redis confirms the subscription. Returns the unsubscriber. */
  async listen(channel: string, listener: Listener): Promise<() => void> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    set.add(listener);
    await this.subscriber.subscribe(channel);
    return () => {
      const current = this.listeners.get(channel);
      current?.delete(listener);
      if (current?.size === 0) {
        this.listeners.delete(channel);
        void this.subscriber.unsubscribe(channel).catch(() => undefined);
      }
    };
  }
}
