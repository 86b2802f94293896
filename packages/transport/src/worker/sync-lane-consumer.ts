import {
  type InferJob,
  type InferReply,
  type RowResult,
  WIRE_VERSION,
  type WireError,
} from "@ferry/protocol";
import { inOneWrite, isCluster, type RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { ENTRY_FIELD, laneKeys, SYNC_GROUP } from "../shared/sync-lane.js";
import { forgetGoneConsumers } from "./gone-consumers.js";
import type { RowHandler } from "./handlers.js";

export interface SyncLaneOptions {
  /** Rows this worker holds at once (read and not yet answered) for the queue. */
  capacity: number;
  /** An entry held this long without its worker renewing it goes to another worker, in ms. */
  lockDurationMs: number;
  /** How often held entries are renewed and stalled ones looked for, in ms. */
  stalledIntervalMs: number;
  /** Deliveries after which a group whose workers keep dying is answered with an error. */
  maxDeliveries: number;
  /**
   * A consumer of the group idle this long, holding nothing, belonged to a worker that is
   * gone, and is deleted (looked for every tenth of it), in ms. @defaultValue one hour
   */
  goneAfterMs?: number;
}

/** How long one read waits for new entries before it looks again (and notices a close), in ms. */
const BLOCK_MS = 1_000;

/** See `SyncLaneOptions.goneAfterMs`. */
const GONE_AFTER_MS = 60 * 60_000;

/** The signal of a sync row: it is never cancelled, only past its deadline. */
const NEVER = new AbortController().signal;

/** One entry (a coalesced group) this worker holds. */
interface Held {
  stream: string;
  id: string;
  rowsLeft: number;
}

type StreamEntry = [id: string, fields: string[]];
type ReadReply = Array<[stream: string, entries: StreamEntry[]]> | null;

/**
 * The worker's side of one queue's sync lane. It reads groups only while it has room for
 * their rows (so that idle workers get the rest), hands every row to the handler, and answers
 * once per event-loop turn: one PUBLISH per waiting API process, one XACK and one XDEL per
 * band, whatever the number of rows. A group stays pending in the consumer group until it is
 * answered; if this worker dies, another claims it once its lock would have lapsed.
 */
export class SyncLaneConsumer {
  private readonly streams: string[];
  private readonly held = new Map<string, Held>();
  private rowsHeld = 0;
  /** Rows per group lately (smoothed): how many groups one read may take. */
  private rowsPerGroup = 1;
  private closing = false;
  private reading: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private drained: (() => void) | undefined;
  private readonly replies = new Map<string, RowResult[]>();
  private readonly acks = new Map<string, string[]>();
  private flushing: Promise<void> | undefined;
  private flushScheduled = false;
  private flushQueued = false;
  private maintenance: NodeJS.Timeout | undefined;
  private forgotAt = 0;

  constructor(
    /** A connection of its own: reads block on it. */
    private readonly reader: RedisClient,
    /** Answers, acknowledgements and claims. */
    private readonly writer: RedisClient,
    keys: Keys,
    private readonly queue: { name: string; model: string; version: string },
    private readonly consumer: string,
    private readonly options: SyncLaneOptions,
    private readonly handler: RowHandler,
  ) {
    this.streams = laneKeys(keys, queue.name);
  }

  start(): void {
    this.reading = this.read();
    this.maintenance = setInterval(
      () => void this.maintain().catch(() => undefined),
      this.options.stalledIntervalMs,
    );
    this.maintenance.unref();
  }

  /** Stops reading, answers every row held, and leaves the consumer group. */
  async close(): Promise<void> {
    this.closing = true;
    this.wake?.();
    clearInterval(this.maintenance);
    // a read blocks at most BLOCK_MS; one stuck on a dead link is cut (what it took is
    // claimed by another worker later)
    await Promise.race([this.reading, sleep(BLOCK_MS + 500)]);
    this.reader.disconnect();
    if (this.rowsHeld > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await this.flush().catch(() => undefined);
    // Deleting a consumer makes what it still holds unclaimable: leave the group only from a
    // band where it holds nothing (a failed flush, or a read cut mid-reply, leaves groups
    // pending for another worker to claim).
    await Promise.all(
      this.streams.map(async (stream) => {
        const mine = (await this.writer.xpending(
          stream,
          SYNC_GROUP,
          "-",
          "+",
          1,
          this.consumer,
        )) as unknown[];
        if (mine.length === 0)
          await this.writer.xgroup("DELCONSUMER", stream, SYNC_GROUP, this.consumer);
      }),
    ).catch(() => undefined);
  }

  private async read(): Promise<void> {
    await this.ensureGroups().catch(() => undefined);
    await this.maintain().catch(() => undefined);
    while (!this.closing) {
      const free = this.options.capacity - this.rowsHeld;
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      let reply: ReadReply;
      try {
        reply = (await this.reader.xreadgroup(
          "GROUP",
          SYNC_GROUP,
          this.consumer,
          "COUNT",
          Math.max(1, Math.floor(free / this.rowsPerGroup)),
          "BLOCK",
          BLOCK_MS,
          "STREAMS",
          ...this.streams,
          ...this.streams.map(() => ">"),
        )) as ReadReply;
      } catch (err) {
        if (this.closing) break;
        // the groups are gone (a Redis restarted without its data): make them again
        if (String(err).includes("NOGROUP")) await this.ensureGroups().catch(() => undefined);
        else await sleep(200);
        continue;
      }
      // highest band first: its rows reach the batcher first
      for (const [stream, entries] of reply ?? [])
        for (const [id, fields] of entries) this.take(stream, id, fields);
      // The next read waits a turn, so that what this one took runs first (an inline model
      // computes on this thread) and its answers go out ahead of it rather than behind it
      // (measured side by side: docs/benchmarks.md).
      if (this.rowsHeld > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private async ensureGroups(): Promise<void> {
    await Promise.all(
      this.streams.map((stream) =>
        this.writer.xgroup("CREATE", stream, SYNC_GROUP, "0", "MKSTREAM").catch((err: unknown) => {
          if (!String(err).includes("BUSYGROUP")) throw err;
        }),
      ),
    );
  }

  private take(stream: string, id: string, fields: string[], failure?: WireError): void {
    const job = parseGroup(fields);
    if (!job) {
      // nobody can be answered: drop it rather than read it again forever
      this.acknowledge(stream, id);
      return;
    }
    const entry: Held = { stream, id, rowsLeft: job.rows.length };
    this.held.set(`${stream} ${id}`, entry);
    this.rowsHeld += job.rows.length;
    this.rowsPerGroup = 0.8 * this.rowsPerGroup + 0.2 * job.rows.length;
    for (const row of job.rows) {
      if (failure) {
        queueMicrotask(() => this.answer(job, entry, { rid: row.rid, ok: false, error: failure }));
        continue;
      }
      this.handler(row, job, { jobId: id, signal: NEVER }).then(
        (result) => this.answer(job, entry, result),
        (err: unknown) =>
          this.answer(job, entry, {
            rid: row.rid,
            ok: false,
            error: { code: "MODEL_ERROR", message: String(err) },
          }),
      );
    }
  }

  private answer(job: InferJob, entry: Held, result: RowResult): void {
    if (job.reply_to) {
      let results = this.replies.get(job.reply_to);
      if (!results) {
        results = [];
        this.replies.set(job.reply_to, results);
      }
      results.push(result);
    }
    this.rowsHeld--;
    if (--entry.rowsLeft === 0) {
      this.held.delete(`${entry.stream} ${entry.id}`);
      this.acknowledge(entry.stream, entry.id);
    } else this.scheduleFlush();
    this.wake?.();
    if (this.rowsHeld === 0) this.drained?.();
  }

  private acknowledge(stream: string, id: string): void {
    let ids = this.acks.get(stream);
    if (!ids) {
      ids = [];
      this.acks.set(stream, ids);
    }
    ids.push(id);
    this.scheduleFlush();
  }

  /**
   * With nothing else held, the answers go at once (after this microtask: a batch's rows are
   * answered together), ahead of the next read; otherwise once this turn is over, so that the
   * batches that end in it share one round trip.
   */
  private scheduleFlush(): void {
    if (this.rowsHeld === 0) {
      if (this.flushQueued) return;
      this.flushQueued = true;
      queueMicrotask(() => {
        this.flushQueued = false;
        void this.flush().catch(() => undefined);
      });
      return;
    }
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush().catch(() => undefined);
    });
  }

  /**
   * Sends this turn's answers, then forgets the groups they finish. Answers first: a worker
   * that dies between the two leaves groups that another answers again, and the API keeps
   * the first answer of each row. A failed send is not retried: the groups stay pending and
   * are claimed, and the API sends its waiting rows again once its link is back.
   */
  private async flush(): Promise<void> {
    await this.flushing;
    if (this.replies.size === 0 && this.acks.size === 0) return;
    const acks = [...this.acks];
    this.acks.clear();
    const forget = () =>
      Promise.all(
        acks.flatMap(([stream, ids]) => [
          this.writer.xack(stream, SYNC_GROUP, ...ids),
          this.writer.xdel(stream, ...ids),
        ]),
      );
    // the answers first, and on one server the acks with them, in one write
    const sent = inOneWrite(this.writer, () => {
      const published: Promise<unknown>[] = [];
      for (const [channel, results] of this.replies) {
        const reply: InferReply = {
          v: WIRE_VERSION,
          job: "",
          model: this.queue.model,
          version: this.queue.version,
          worker: this.consumer,
          results,
        };
        published.push(this.writer.spublish(channel, JSON.stringify(reply)));
      }
      this.replies.clear();
      // One server runs one connection's commands in order, so the acks may follow at once; a
      // cluster's answer channel and lane live on different nodes: the acks wait for the answers.
      return isCluster(this.writer)
        ? Promise.all(published).then(forget)
        : Promise.all([...published, forget()]);
    });
    this.flushing = sent.then(
      () => undefined,
      () => undefined, // the groups stay pending and are claimed (see above)
    );
    await this.flushing;
  }

  /**
   * Renews the groups this worker holds (resetting their idle time, so nobody claims them),
   * then claims groups whose worker has not renewed them for a lock's duration: it died.
   */
  private async maintain(): Promise<void> {
    const now = Date.now();
    // every held group, every round (one XCLAIM a band): its idle time then never exceeds one
    // stalled interval, well inside the lock
    const held = new Map<string, string[]>();
    for (const entry of this.held.values())
      held.set(entry.stream, [...(held.get(entry.stream) ?? []), entry.id]);
    for (const [stream, ids] of held)
      await this.writer.xclaim(stream, SYNC_GROUP, this.consumer, 0, ...ids, "JUSTID");
    if (this.closing) return;
    if (now - this.forgotAt >= (this.options.goneAfterMs ?? GONE_AFTER_MS) / 10) {
      this.forgotAt = now;
      await forgetGoneConsumers(
        this.writer,
        this.streams,
        SYNC_GROUP,
        this.consumer,
        this.options.goneAfterMs ?? GONE_AFTER_MS,
      );
    }
    for (const stream of this.streams) {
      const free = this.options.capacity - this.rowsHeld;
      if (free <= 0) return;
      const [, claimed] = (await this.writer.xautoclaim(
        stream,
        SYNC_GROUP,
        this.consumer,
        this.options.lockDurationMs,
        "0-0",
        "COUNT",
        Math.max(1, Math.floor(free / this.rowsPerGroup)),
      )) as [string, Array<StreamEntry | null>];
      const entries = claimed.filter((e): e is StreamEntry => e !== null);
      if (entries.length === 0) continue;
      const deliveries = await this.deliveries(stream, entries);
      for (const [id, fields] of entries) {
        const times = deliveries.get(id) ?? 1;
        this.take(
          stream,
          id,
          fields,
          times > this.options.maxDeliveries
            ? {
                code: "MODEL_ERROR",
                message: `the workers that took this request stopped ${times - 1} times; it is not tried again`,
              }
            : undefined,
        );
      }
    }
  }

  /** How often each claimed entry has been delivered (a worker died on it each time but one). */
  private async deliveries(stream: string, entries: StreamEntry[]): Promise<Map<string, number>> {
    const ids = entries.map(([id]) => id);
    const rows = (await this.writer.xpending(
      stream,
      SYNC_GROUP,
      ids[0] ?? "-",
      ids.at(-1) ?? "+",
      1_000,
      this.consumer,
    )) as Array<[string, string, number, number]>;
    return new Map(rows.map(([id, , , times]) => [id, Number(times)]));
  }
}

function parseGroup(fields: string[]): InferJob | undefined {
  const at = fields.indexOf(ENTRY_FIELD);
  const raw = at >= 0 ? fields[at + 1] : undefined;
  if (raw === undefined) return undefined;
  try {
    const job = JSON.parse(raw) as InferJob;
    return job.v === WIRE_VERSION && job.kind === "infer" && Array.isArray(job.rows)
      ? job
      : undefined;
  } catch {
    return undefined;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
