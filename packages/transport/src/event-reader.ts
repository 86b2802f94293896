import type { JobEvent, JobEventBody } from "@ferry/protocol";
import type { Redis } from "ioredis";
import type { ChannelMux } from "./channel-mux.js";
import { parsePublished, streamIdAfter } from "./event-log.js";
import type { Keys } from "./keys.js";

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

  async *read(
    jobId: string,
    after: string | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<JobEvent> {
    const key = this.keys.events(jobId);
    const live: JobEvent[] = [];
    let wake: (() => void) | undefined;
    const unlisten = await this.mux.listen(key, (message) => {
      const event = parsePublished(message);
      if (event) live.push(event);
      wake?.();
    });
    const onAbort = () => wake?.();
    signal?.addEventListener("abort", onAbort);
    try {
      let last = after ?? "0-0";
      const replay = await this.redis.xrange(key, after ? `(${after}` : "-", "+");
      for (const [id, fields] of replay) {
        const body = JSON.parse(fields[1] ?? "{}") as JobEventBody;
        last = id;
        yield { id, body };
        if (body.type === "done") return;
      }
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
  }
}
