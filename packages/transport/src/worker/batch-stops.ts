import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";

/** How often a batch whose chunks this worker holds is looked at again, in ms. */
const LOOK_MS = 250;

/** Why a batch no longer wants its chunks run. */
export type BatchStop = "cancelled" | "gone";

interface Held {
  chunks: number;
  stop: BatchStop | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Whether the batches whose chunks this worker holds still want them run: cancelled (`POST
 * /v1/batches/{id}/cancel`), or gone (an upload refused midway forgets its batch). A worker
 * takes a batch's chunks as fast as they are queued (64 at once for digits), so a cancel
 * that only removed queued chunks left nearly every row to run; each chunk reads this when it
 * starts and between its batches. One command a batch every LOOK_MS while any of its chunks
 * is held, not one a chunk.
 */
export class BatchStops {
  private readonly held = new Map<string, Held>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /**
   * Holds a chunk of `batch` until `release`: `stop()` says, from a read made now and the
   * looks since, whether its batch was cancelled or is gone.
   */
  async hold(batch: string): Promise<{ stop: () => BatchStop | undefined; release: () => void }> {
    let held = this.held.get(batch);
    if (!held) {
      held = { chunks: 0, stop: undefined, timer: undefined };
      this.held.set(batch, held);
    }
    const entry = held;
    entry.chunks++;
    // read once as its batch's first chunk is held; the look every LOOK_MS serves the rest
    // (a worker holds 64 of a batch's chunks at once), and their batches ask again later
    if (entry.chunks === 1) entry.stop ??= await this.read(batch);
    entry.timer ??= setInterval(() => {
      void this.read(batch).then((stop) => {
        entry.stop ??= stop;
      });
    }, LOOK_MS).unref();
    let released = false;
    return {
      stop: () => entry.stop,
      release: () => {
        if (released) return;
        released = true;
        if (--entry.chunks > 0) return;
        clearInterval(entry.timer);
        this.held.delete(batch);
      },
    };
  }

  /** Reads now why `batch` is stopped, if it is (a failed read says it is not). */
  async read(batch: string): Promise<BatchStop | undefined> {
    try {
      const [cancelled, model] = await this.redis.hmget(
        this.keys.batch(batch),
        "cancelled_at",
        "model",
      );
      if (cancelled !== null) return "cancelled";
      return model === null ? "gone" : undefined;
    } catch {
      return undefined;
    }
  }
}
