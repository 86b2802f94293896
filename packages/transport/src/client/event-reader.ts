import type { JobEvent } from "@ferry/protocol";
import type { ChannelMux } from "../shared/channel-mux.js";
import type { RedisClient } from "../shared/connection.js";
import { parseEntry, parsePublished, streamIdAfter } from "../shared/event-log.js";
import type { JobRef, Keys } from "../shared/keys.js";

/** How long a follow waits on its channel with nothing heard before it reads the log again. */
const RECHECK_MS = 5_000;
/** Events a replay reads from the log at a time. */
const REPLAY_PAGE = 256;

/**
 * The reading side of job event logs (the API). A reader subscribes to the job's channel
 * first, then replays the stream after `after`, then follows the live events, dropping any
 * whose id it has already passed: a late or reconnecting reader misses nothing and sees
 * nothing twice. The read ends after the `done` event, or when `signal` aborts.
 *
 * The log, not the channel, is what a reader is owed: a follow that has heard nothing for
 * `recheckMs` reads the log again, so that a message lost without a resubscription to say so
 * (a shard subscriber replaced mid-failover) costs a delay, never a stream that waits forever;
 * and a log found gone then (expired, removed) ends the read.
 */
export class EventReader {
  /** Open follows, told when the subscriber lost its link and events may have been missed. */
  private readonly following = new Set<() => void>();

  constructor(
    private readonly redis: RedisClient,
    private readonly mux: ChannelMux,
    private readonly keys: Keys,
    private readonly recheckMs = RECHECK_MS,
  ) {
    // a reconnect or a shard's failover: what was published meanwhile is in the log
    mux.onResubscribed(() => {
      for (const missed of this.following) missed();
    });
  }

  /** Subscribes to a job's events now; what is read from the result starts from this moment. */
  async open(job: JobRef): Promise<EventFollow> {
    const key = this.keys.events(job);
    const live: JobEvent[] = [];
    let wake: (() => void) | undefined;
    const listening = await this.mux.listen(
      key,
      (message) => {
        const event = parsePublished(message);
        if (event) live.push(event);
        wake?.();
      },
      "shard",
    );
    let open = true;
    let stale = false;
    const missed = () => {
      stale = true;
      wake?.();
    };
    this.following.add(missed);
    const unlisten = () => {
      if (open) listening();
      open = false;
      this.following.delete(missed);
    };
    const redis = this.redis;
    const recheckMs = this.recheckMs;
    return {
      close: unlisten,
      async *events(after, signal) {
        const onAbort = () => wake?.();
        signal?.addEventListener("abort", onAbort);
        try {
          let last = after ?? "0-0";
          // the log after `from`, a page at a time: a reader that replays a long log holds one
          // page, and waits for its client between pages (a whole log in one XRANGE, ~320 KB of
          // a 240-token job with its alternatives, had been read and parsed at once per reader,
          // and 100 replays of one log slowed every other key's requests tenfold)
          const logAfter = async function* (from: string) {
            let start = from === "0-0" ? "-" : `(${from}`;
            for (;;) {
              const page = await redis.xrange(key, start, "+", "COUNT", REPLAY_PAGE);
              for (const entry of page) {
                const event = parseEntry(entry);
                last = event.id;
                yield event;
              }
              if (page.length < REPLAY_PAGE) return;
              start = `(${last}`;
            }
          };
          for await (const event of logAfter(last)) {
            yield event;
            if (event.body.type === "done") return;
          }
          // a reader that resumes at or past the log's `done` has nothing more to wait for:
          // past it (an id this log never sent), it is given the `done`, or a client such as
          // EventSource reconnects with the same id until the log expires
          const ended = after ? await endAtOrBefore(redis, key, after) : undefined;
          if (ended) {
            if (ended.id !== after) yield ended;
            return;
          }
          while (!signal?.aborted) {
            if (stale) {
              // read the log again after the last event passed on: the live ones missed are there
              stale = false;
              const before = last;
              for await (const event of logAfter(last)) {
                yield event;
                if (event.body.type === "done") return;
              }
              // a log that is gone (its job kept its time and expired, or was removed) will say
              // nothing more: its follow had waited on keep-alives forever; nor will one that
              // ended before where this reader asked to resume from
              const end = last === before ? await endAtOrBefore(redis, key, last) : undefined;
              if (end) {
                if (end.id !== last) yield end;
                return;
              }
              if (last === before && (await redis.exists(key)) === 0) return;
              continue;
            }
            const event = live.shift();
            if (!event) {
              let recheck: NodeJS.Timeout | undefined;
              await new Promise<void>((resolve) => {
                wake = resolve;
                recheck = setTimeout(missed, recheckMs);
              });
              clearTimeout(recheck);
              wake = undefined;
              continue;
            }
            if (!streamIdAfter(event.id, last)) {
              // the end, at or before where the reader resumed (a Last-Event-ID past the log's
              // end): nothing after it will come, and the follow had waited on keep-alives until
              // the log expired; one before that point is given, as the replay's above is
              if (event.body.type === "done") {
                if (event.id !== last) yield event;
                return;
              }
              continue;
            }
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
    job: JobRef,
    after: string | undefined,
    signal?: AbortSignal,
  ): AsyncGenerator<JobEvent> {
    const follow = await this.open(job);
    yield* follow.events(after, signal);
  }
}

/** The log's `done`, when it is the log's last event and lies at or before `after`. */
async function endAtOrBefore(
  redis: RedisClient,
  key: string,
  after: string,
): Promise<JobEvent | undefined> {
  const [entry] = await redis.xrevrange(key, "+", "-", "COUNT", 1);
  if (!entry) return undefined;
  const last = parseEntry(entry);
  return last.body.type === "done" && !streamIdAfter(last.id, after) ? last : undefined;
}

/** A subscription to one job's events, opened before they are read. */
export interface EventFollow {
  /** Replays the log after `after`, then follows it live until `done`; ends the subscription. */
  events(after: string | undefined, signal?: AbortSignal): AsyncGenerator<JobEvent>;
  /** Ends the subscription (idempotent; reading to `done` ends it too). */
  close(): void;
}
