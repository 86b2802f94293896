import type { JobEvent } from "@ferry/protocol";
import type { Redis } from "ioredis";
import type { ChannelMux } from "../shared/channel-mux.js";
import { parseEntry, parsePublished, streamIdAfter } from "../shared/event-log.js";
import type { Keys } from "../shared/keys.js";

/**
 * The reading side of job event logs (the API). A reader subscribes to the job's channel
 * first, then replays the stream after `after`, then follows the live events, dropping any
 * whose id it has already passed: a late or reconnecting reader misses nothing and sees
 * nothing twice. The read ends after the `done` event, or when `signal` aborts.
 */
export class EventReader {
  constructor(
    private readonly redis: Redis,
    private readonly mux: ChannelMux,
    private readonly keys: Keys,
  ) {}

  /** Subscribes to a job's events now; what is read from the result starts from this moment. */
  async open(jobId: string): Promise<EventFollow> {
    const key = this.keys.events(jobId);
    const live: JobEvent[] = [];
    let wake: (() => void) | undefined;
    const listening = await this.mux.listen(key, (message) => {
      const event = parsePublished(message);
      if (event) live.push(event);
      wake?.();
    });
    let open = true;
    const unlisten = () => {
      if (open) listening();
      open = false;
    };
    const redis = this.redis;
    return {
      close: unlisten,
      async *events(after, signal) {
        const onAbort = () => wake?.();
        signal?.addEventListener("abort", onAbort);
        try {
          let last = after ?? "0-0";
          const replay = await redis.xrange(key, after ? `(${after}` : "-", "+");
          for (const entry of replay) {
            const event = parseEntry(entry);
            last = event.id;
            yield event;
            if (event.body.type === "done") return;
          }
          // a reader that resumes at or past the log's `done` has nothing more to wait for
          if (after && (await endsBefore(redis, key, after))) return;
          while (!signal?.aborted) {
            const event = live.shift();
            if (!event) {
              await new Promise<void>((resolve) => {
                wake = resolve;
              });
              wake = undefined;
              continue;
            }
            if (!streamIdAfter(event.id, last)) continue;
            last = event.id;
            yield event;
            if (event.body.type === "done") return;
          }
        } finally {
          signal?.removeEventListener("abort", onAbort);
          unlisten();
        }
      },
    };
  }

  async *read(
    jobId: string,
    after: string | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<JobEvent> {
    const follow = await this.open(jobId);
    yield* follow.events(after, signal);
  }
}

/** Whether the log's last event is its `done` and lies at or before `after`. */
async function endsBefore(redis: Redis, key: string, after: string): Promise<boolean> {
  const [entry] = await redis.xrevrange(key, "+", "-", "COUNT", 1);
  if (!entry) return false;
  const last = parseEntry(entry);
  return last.body.type === "done" && !streamIdAfter(last.id, after);
}

/** A subscription to one job's events, opened before they are read. */
export interface EventFollow {
  /** Replays the log after `after`, then follows it live until `done`; ends the subscription. */
  events(after: string | undefined, signal?: AbortSignal): AsyncGenerator<JobEvent>;
  /** Ends the subscription (idempotent; reading to `done` ends it too). */
  close(): void;
}
