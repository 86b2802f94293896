import type { JobEvent, JobEventBody } from "@ferry/protocol";
import type { Redis } from "ioredis";
import type { Keys } from "./keys.js";

/**
 * Appends events to a job's stream and publishes each with the id the stream gave it, in one
 * atomic step: a reader that subscribes first and then replays the stream sees every event,
 * and can drop the duplicates by id.
 */
const APPEND = `
local maxlen = ARGV[2]
for i = 4, #ARGV do
  local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'e', ARGV[i])
  redis.call('PUBLISH', ARGV[1], id .. ' ' .. ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return #ARGV - 3
`;

/** Events a job's log keeps at most; plenty for the longest completion a model allows. */
const MAX_EVENTS = 10_000;

/** The writing side of job event logs (workers). Events of one turn go out in one pipeline. */
export class EventWriter {
  private readonly buffered = new Map<string, JobEventBody[]>();
  private scheduled = false;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly ttlS: number,
  ) {
    redis.defineCommand("ferryAppendEvents", { numberOfKeys: 1, lua: APPEND });
  }

  /** Queues events for a job; they are written together at the end of this turn. */
  emit(jobId: string, events: JobEventBody[]): void {
    const list = this.buffered.get(jobId);
    if (list) list.push(...events);
    else this.buffered.set(jobId, [...events]);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  /** Writes everything queued; resolves once Redis has it. */
  async flush(): Promise<void> {
    this.scheduled = false;
    if (this.buffered.size === 0) return;
    const pipeline = this.redis.pipeline();
    for (const [jobId, events] of this.buffered) {
      const key = this.keys.events(jobId);
      const args = [
        key,
        key,
        String(MAX_EVENTS),
        String(this.ttlS),
        ...events.map((e) => JSON.stringify(e)),
      ];
      (pipeline as unknown as Record<string, (...a: string[]) => void>).ferryAppendEvents?.(
        ...args,
      );
    }
    this.buffered.clear();
    await pipeline.exec();
  }
}

/** Parses what the append script published: "<id> <json>". */
export function parsePublished(message: string): JobEvent | undefined {
  const space = message.indexOf(" ");
  if (space < 0) return undefined;
  try {
    return {
      id: message.slice(0, space),
      body: JSON.parse(message.slice(space + 1)) as JobEventBody,
    };
  } catch {
    return undefined;
  }
}

/** Stream ids compare as (ms, seq) pairs. */
export function streamIdAfter(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am > bm || (am === bm && as > bs);
}
