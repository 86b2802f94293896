import { setMaxListeners } from "node:events";
import { FerryError, messageOf, pause } from "@ferry/protocol";
import {
  FINAL_BATCH_STATUSES,
  type InferenceClient,
  linesOf,
  type OpenAiBatchState,
  PostponedRun,
  type StorageLimits,
} from "@ferry/transport";
import type { Logger } from "pino";
import { type BatchEndpoint, endpointOf } from "../http/batch-endpoints.js";
import type { BatchLineKind } from "../http/batch-line.js";
import { type PackedChunkLines, readPacked } from "../http/packed-lines.js";
import { ADMIN_ID } from "../http/tenant.js";
import { AnswerRecorder } from "./answer-recorder.js";
import { type FailBatch, failBatch, finalizeBatch } from "./batch-finalizer.js";
import { answersHoldId, type ParsedLine, parseLine } from "./batch-lines.js";
import { LineAnswerer, type RenderAnswers } from "./line-answerer.js";
import { LinkedOutput } from "./linked-output.js";
import { ReadAhead } from "./read-ahead.js";
import { Slots } from "./slots.js";

/** Lines of one batch in flight at once, unless its kind says: enough to fill a model's seats. */
const LINES_IN_FLIGHT = 64;
/**
 * Lines of one url a kind that answers many at once gets together, and such groups in flight
 * (a model no worker serves holds its group's slot for a predict's timeout).
 */
const GROUP_LINES = 2_048;
const GROUPS_IN_FLIGHT = 8;
/**
 * Packed chunks read ahead of the one being dispatched: a read waits its turn behind the
 * answers the loop and Redis are keeping, and a group's chunks read one after another had set
 * the run's pace (~0.1-0.2 s a group of MNIST rows, the worker idle between them).
 */
const PACKED_READ_AHEAD = 8;
/** Batches one API process runs at once (each holding LINES_IN_FLIGHT lines at most). */
const BATCHES_AT_ONCE = 16;
/** A runner's lock on its batch, and how often runners look for a dead one's, in ms. */
const LOCK_MS = 15_000;
const STALLED_CHECK_MS = 5_000;
/** How often a running batch looks for its cancel, in ms. */
const WATCH_MS = 500;
/** How long a run waits for its batch's state, written just after the run was queued, in ms. */
const CREATE_WAIT_MS = 5_000;
/** A running batch's seat among its tenant's (renewed a third of it at a time), in ms. */
const SEAT_LEASE_MS = 30_000;
/** How long a batch whose tenant runs as many as it may waits before it is tried again, in ms. */
const POSTPONE_MS = 5_000;

/**
 * Runs OpenAI-shaped batches on this API process, beside every other replica: a batch's lines
 * stream from its input file, a window of them at a time, each answered through its
 * endpoint's own service (`LineAnswerer`: checked and answered as the route answers it, at
 * the lowest priority) and kept in Redis once; the output and error files are links to a first
 * run's kept chunks (`LinkedOutput`), or else written from the kept answers once every line
 * has run. A runner that dies leaves its batch to another, which
 * skips the lines answered and writes the files afresh.
 */
export class OpenAiBatchRunner {
  private readonly kinds = new Map<BatchEndpoint, BatchLineKind>();
  private readonly answerer: LineAnswerer;
  private readonly fail: FailBatch;
  private readonly seatLeaseMs: number;
  private readonly storage: StorageLimits | undefined;

  constructor(
    private readonly client: InferenceClient,
    kinds: readonly BatchLineKind[],
    /** How long a batch and its files are kept once it ends, in s (JOB_TTL_S). */
    private readonly ttlS: number,
    log: Logger,
    /** Batches one tenant runs at once, across every replica (BATCHES_RUNNING_PER_KEY). */
    private readonly perKey: number,
    options: {
      /** A running batch's seat lease, in ms (renewed a third of it at a time). */
      seatLeaseMs?: number;
      /**
       * What one owner's files may hold (FILE_STORAGE_PER_KEY_BYTES): a batch's answers count
       * against it as they are kept, and the batch stops, failed, past it. Unset: not held.
       */
      storage?: StorageLimits;
      /** Renders a chunk's answers off the event loop (the API's parse thread); else on it. */
      renderAnswers?: RenderAnswers;
    } = {},
  ) {
    this.seatLeaseMs = options.seatLeaseMs ?? SEAT_LEASE_MS;
    this.storage = options.storage;
    for (const kind of kinds) this.kinds.set(kind.endpoint, kind);
    this.fail = failBatch(client, ttlS);
    this.answerer = new LineAnswerer(client, this.kinds, log, options.renderAnswers);
  }

  /** Takes batches from the queue on this process, as they come. */
  start(): void {
    this.client.openAiBatchRuns.process(
      (id, signal) => this.run(id, signal),
      {
        concurrency: BATCHES_AT_ONCE,
        lockDurationMs: LOCK_MS,
        stalledIntervalMs: STALLED_CHECK_MS,
      },
      (id, err) => this.fail(id, `the batch could not be run: ${messageOf(err)}`),
    );
  }

  /**
   * Runs batch `id` to its end: every line answered (or not run, once it is cancelled or its
   * window has passed), its files written. `handback` stops it midway (this process is
   * stopping): it then throws, and the batch goes to another runner.
   */
  async run(id: string, handback: AbortSignal): Promise<void> {
    const batch = await this.created(id);
    if (!batch || FINAL_BATCH_STATUSES.includes(batch.status)) return;
    // an input file deleted since: the finalizer writes out what was answered, and fails it
    if (!(await this.client.files.get(batch.input_file_id)))
      return finalizeBatch(this.client, id, this.ttlS, this.fail);
    const store = this.client.openAiBatches;
    // a batch that will run lines takes a seat among its tenant's first: one tenant's many
    // batches take turns, and another's is not left behind all of them (one cancelled or out
    // of its window ends without one)
    // (with API_KEYS unset every caller is one tenant, "": there is no other to make room for)
    const takesSeat =
      batch.owner !== "" &&
      (batch.status === "validating" || batch.status === "in_progress") &&
      batch.expires_at * 1000 > Date.now();
    const running = this.client.runningBatches;
    if (takesSeat && !(await running.enter(batch.owner, id, this.perKey, this.seatLeaseMs)))
      throw new PostponedRun(POSTPONE_MS + Math.floor(Math.random() * 1_000));
    const stop = new AbortController();
    // a seat whose lease lapsed (this process stalled past it) may have gone to another of
    // the tenant's batches: then this one stops where it is and waits its turn again, rather
    // than run as one batch more than the tenant may
    // (once every line has run, the seat no longer matters: the batch is finalized anyway)
    let unseated = false;
    let dispatching = true;
    let renewal: Promise<unknown> = Promise.resolve();
    const renewing = takesSeat
      ? setInterval(() => {
          renewal = running.enter(batch.owner, id, this.perKey, this.seatLeaseMs).then(
            (held) => {
              if (held || stop.signal.aborted || !dispatching) return;
              unseated = true;
              stop.abort();
            },
            () => undefined,
          );
        }, this.seatLeaseMs / 3)
      : undefined;
    // every line in flight listens on it (its event stream, its back-off): more than the
    // default 10 is no leak here, and still a bounded number
    setMaxListeners(8 * LINES_IN_FLIGHT, stop.signal);
    const unwatch = this.watch(batch, stop, handback);
    /** Why the run stopped short, where its batch fails with the files of what it answered. */
    let failure: string | undefined;
    let linked: LinkedOutput | undefined;
    try {
      if (batch.status === "validating") await store.transition(id, ["validating"], "in_progress");
      if (!stop.signal.aborted && (await store.status(id)) === "in_progress")
        linked = await this.dispatch(batch, stop.signal);
    } catch (err) {
      if (!(err instanceof FerryError && err.code === "QUOTA_EXCEEDED")) throw err;
      failure = err.message;
    } finally {
      dispatching = false;
      unwatch();
      clearInterval(renewing);
      // after a renewal in flight, which would otherwise seat the batch again once it left
      await renewal;
      if (takesSeat) await running.leave(batch.owner, id).catch(() => undefined);
    }
    if (handback.aborted)
      throw new FerryError("UNAVAILABLE", "this API process stopped; another runner takes over");
    if (unseated) throw new PostponedRun(POSTPONE_MS + Math.floor(Math.random() * 1_000));
    await finalizeBatch(this.client, id, this.ttlS, this.fail, failure, linked);
  }

  /** The batch, once its state is written (its run is queued just before). */
  private async created(id: string): Promise<OpenAiBatchState | undefined> {
    const until = Date.now() + CREATE_WAIT_MS;
    for (;;) {
      const batch = await this.client.openAiBatches.get(id);
      if (batch || Date.now() > until) return batch;
      await pause(100);
    }
  }

  /** Aborts `stop` on a cancel, at the end of the batch's window, or on `handback`. */
  private watch(batch: OpenAiBatchState, stop: AbortController, handback: AbortSignal) {
    const abort = () => stop.abort();
    handback.addEventListener("abort", abort);
    if (handback.aborted) abort();
    const expiry = setTimeout(abort, Math.max(0, batch.expires_at * 1000 - Date.now()));
    const polling = setInterval(() => {
      this.client.openAiBatches.status(batch.id).then(
        (status) => status === "cancelling" && abort(),
        () => undefined,
      );
    }, WATCH_MS);
    return () => {
      clearTimeout(expiry);
      clearInterval(polling);
      handback.removeEventListener("abort", abort);
    };
  }

  /**
   * Holds a batch's answers, as they are kept, in its owner's file storage (what its output
   * and error files then hold instead): a batch of many-choice lines with log probabilities
   * could keep hundreds of GB from a 100 MB input file. Nothing is held for the admin, or
   * without limits.
   */
  private answersHold(batch: OpenAiBatchState): (bytes: number) => Promise<void> {
    const limits = this.storage;
    if (!limits || batch.owner === ADMIN_ID) return async () => undefined;
    const expiresAtS = batch.expires_at + this.ttlS;
    return (bytes) =>
      this.client.storage.grow(batch.owner, answersHoldId(batch.id), bytes, expiresAtS, {
        maxBytes: limits.maxBytes,
        // the hold is not a file: the number of files is theirs alone
        maxItems: 0,
      });
  }

  /**
   * Runs every line not yet answered, LINES_IN_FLIGHT at a time, reading the file a chunk at
   * a time: the process holds one chunk and the lines in flight, whatever the file's size.
   */
  private async dispatch(
    batch: OpenAiBatchState,
    signal: AbortSignal,
  ): Promise<LinkedOutput | undefined> {
    const store = this.client.openAiBatches;
    const kind = this.kinds.get(
      endpointOf(batch.endpoint)?.endpoint ?? (batch.endpoint as BatchEndpoint),
    );
    const many = kind?.openMany?.(batch.owner);
    const slots = new Slots(many ? GROUPS_IN_FLIGHT : (kind?.linesInFlight ?? LINES_IN_FLIGHT));
    const hold = this.answersHold(batch);
    const recorder = new AnswerRecorder(async (lines) => {
      await hold(lines.reduce((bytes, { line }) => bytes + Buffer.byteLength(line), 0));
      await store.recordMany(batch.id, lines);
    });
    let failure: { err: unknown } | undefined;
    let index = 0;
    /** Runs `work` in a slot; false once the batch stopped or a line failed outright. */
    const inSlot = async (work: () => Promise<void>): Promise<boolean> => {
      await slots.take();
      if (signal.aborted || failure) {
        slots.give();
        return false;
      }
      work()
        .catch((err: unknown) => {
          failure ??= { err };
        })
        .finally(() => slots.give());
      return true;
    };
    // a first run has nothing to skip: no look per chunk (a runner that lost its lock while it
    // lived may still record meanwhile; the record keeps one answer per line all the same)
    const fresh = !(await store.anyAnswered(batch.id));
    // a first run of chunks answered whole links the files to the chunks' kept answers
    // (failing that, the finalizer writes them from the kept answers, as after a takeover)
    const linked =
      fresh && many
        ? await LinkedOutput.begin(this.client, batch).catch(() => undefined)
        : undefined;
    try {
      const fileId = batch.input_file_id;
      // one look for the whole file, not one a chunk, when none of it was packed
      const runPacked =
        many?.runPacked && (await this.client.files.anyPacked(fileId)) ? many.runPacked : undefined;
      /** Packed chunks gathered to run together, and their lines. */
      let gathered: Array<{ chunk: number; first: number; lines: PackedChunkLines }> = [];
      let gatheredLines = 0;
      const runGathered = async (): Promise<boolean> => {
        const parts = gathered;
        gathered = [];
        gatheredLines = 0;
        if (parts.length === 0 || !runPacked) return true;
        return inSlot(() =>
          this.answerer.packedChunks(batch, runPacked, parts, signal, hold, linked),
        );
      };
      const packedReads = runPacked
        ? new ReadAhead(PACKED_READ_AHEAD, (at) => this.client.files.packedHead(fileId, at))
        : undefined;
      chunks: for (let at = 0; ; at++) {
        // a chunk the upload packed (plain predict lines) is read as its head (ids, urls,
        // widths), not parsed again; its rows go from where they lie to the worker
        const packedHead = await packedReads?.read(at);
        const packed = packedHead ? readPacked(packedHead) : undefined;
        let lines: string[] | undefined;
        if (!packed) {
          const raw = await this.client.files.chunk(fileId, at);
          if (!raw) break;
          lines = linesOf(raw);
        }
        const count = packed ? packed.customIds.length : (lines?.length ?? 0);
        const from = index;
        index += count;
        const answered = fresh
          ? { lines: new Array<boolean>(count).fill(false), whole: false }
          : await store.answered(batch.id, at, from, count);
        if (answered.whole) continue;
        if (packed && !answered.lines.includes(true)) {
          gathered.push({ chunk: at, first: from, lines: packed });
          gatheredLines += count;
          if (gatheredLines >= GROUP_LINES && !(await runGathered())) break;
          continue;
        }
        if (!(await runGathered())) break;
        if (many && lines && !answered.lines.includes(true)) {
          // the chunk at once, its answers kept as one value
          const chunkLines = lines;
          if (
            !(await inSlot(() =>
              this.answerer.chunk(batch, many, at, from, chunkLines, signal, hold, linked),
            ))
          )
            break;
          continue;
        }
        // a chunk half answered is taken a line at a time, as stored (the files are then the
        // finalizer's to write)
        linked?.giveUp();
        if (!lines) lines = linesOf((await this.client.files.chunk(fileId, at)) ?? Buffer.alloc(0));
        const open: Array<{ index: number; raw: string }> = [];
        for (let k = 0; k < lines.length; k++)
          if (!answered.lines[k]) open.push({ index: from + k, raw: lines[k] ?? "" });
        if (many) {
          // a chunk a runner before this one left half answered, a line at a time: the rest so
          // too, a group per url (for predict, per model), so that one model's lines never
          // wait on another's (one that no worker serves, say)
          const byUrl = new Map<string, Array<{ index: number; line: ParsedLine }>>();
          for (const { index, raw } of open) {
            const line = parseLine(raw) as ParsedLine;
            const group = byUrl.get(line.url) ?? [];
            byUrl.set(line.url, group);
            group.push({ index, line });
          }
          for (const lines of byUrl.values())
            for (let at = 0; at < lines.length; at += GROUP_LINES) {
              const group = lines.slice(at, at + GROUP_LINES);
              if (!(await inSlot(() => this.answerer.group(batch, many, group, signal, recorder))))
                break chunks;
            }
          continue;
        }
        for (const line of open)
          if (
            !(await inSlot(() => this.answerer.line(batch, line.index, line.raw, signal, recorder)))
          )
            break chunks;
      }
      await runGathered();
    } finally {
      await slots.drained();
      // a batch of its own that could not be sealed opens by itself later: the lines are kept
      await many?.close(signal.aborted || failure !== undefined).catch(() => undefined);
    }
    if (failure) throw failure.err;
    return linked;
  }
}
