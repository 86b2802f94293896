import { randomUUID } from "node:crypto";
import { type ErrorCode, FerryError, MAX_TIMEOUT_MS, pause } from "@ferry/protocol";
import type { InferenceClient, OpenAiBatchState } from "@ferry/transport";
import type { Logger } from "pino";
import { type BatchEndpoint, endpointOf } from "../http/batch-endpoints.js";
import type { BatchLineKind, LineOutcome, ManyLines } from "../http/batch-line.js";
import type { CallOptions } from "../http/call.js";
import { errorBody, httpStatus, toFerryError } from "../http/errors.js";
import { joinPacked, type PackedChunkLines } from "../http/packed-lines.js";
import { refusalBackoffMs } from "../http/refusal-backoff.js";
import { type AnswerPlan, answerPlan, type RenderedAnswers, renderAnswers } from "./answer-plan.js";
import type { AnswerRecorder } from "./answer-recorder.js";
import { FAILED, OK } from "./batch-finalizer.js";
import { answerLine, lineId, type ParsedLine, parseLine } from "./batch-lines.js";
import type { LinkedOutput } from "./linked-output.js";

/** The body a packed line stands for, as far as its options go: no timeout_ms of its own. */
const PLAIN_BODY = Object.freeze({});

/** Renders a chunk's answers (`renderAnswers`), where the caller chooses. */
export type RenderAnswers = (plan: AnswerPlan) => Promise<RenderedAnswers>;

/** The lowest priority: a batch's lines go after every interactive request. */
const BATCH_PRIORITY = 1;
/** How long a line's job and event log outlive it, in s: its answer is kept here, once. */
const LINE_KEEP_S = 60;
/** Refusals a line waits out rather than fails on: a batch is not in a hurry, its caller gone. */
const WAITED_OUT: readonly ErrorCode[] = ["QUEUE_FULL", "UNAVAILABLE"];

interface Answer {
  status: number;
  body: unknown;
}

/**
 * Answers an OpenAI batch's lines, each as its route would (through its endpoint's
 * `BatchLineKind`), at the lowest priority, and keeps each answer once: a whole chunk of the
 * input at once, a group of lines at once, or a line alone. What runs which lines, and when,
 * is `OpenAiBatchRunner`'s.
 */
export class LineAnswerer {
  constructor(
    private readonly client: InferenceClient,
    private readonly kinds: ReadonlyMap<BatchEndpoint, BatchLineKind>,
    private readonly log: Logger,
    /** Where a chunk's answers are rendered: the API's parse thread; unset, here. */
    private readonly render?: RenderAnswers,
  ) {}

  /**
   * Runs a chunk of the input file (its lines from `first`) through its kind at once and keeps
   * its answers as one value, in its lines' order: one record per chunk, not per line.
   */
  async chunk(
    batch: OpenAiBatchState,
    many: ManyLines,
    chunk: number,
    first: number,
    raw: readonly string[],
    signal: AbortSignal,
    /** Holds the answers' bytes in the batch owner's storage before they are kept. */
    hold: (bytes: number) => Promise<void>,
    /** Takes the answers this run keeps, to write into the files as they come. */
    linked?: LinkedOutput,
  ): Promise<void> {
    const parsed = raw.map((line) => parseLine(line) as ParsedLine);
    const answers = await this.many(batch, parsed, signal, (opts) =>
      many.run(parsed, opts, signal),
    );
    if (!answers) return;
    const customIds = parsed.map((line) => line.custom_id);
    await this.keepChunk(batch, chunk, first, customIds, answers, hold, linked);
  }

  /**
   * Runs consecutive chunks the upload packed (plain predict lines) through their kind at once,
   * their rows read where they are packed (no line parsed), and keeps each chunk's answers as
   * one value as `chunk` does: a chunk holds 256 of MNIST's wide rows, and one run a chunk
   * cost more than its rows.
   */
  async packedChunks(
    batch: OpenAiBatchState,
    runPacked: NonNullable<ManyLines["runPacked"]>,
    parts: ReadonlyArray<{ chunk: number; first: number; lines: PackedChunkLines }>,
    signal: AbortSignal,
    hold: (bytes: number) => Promise<void>,
    linked?: LinkedOutput,
  ): Promise<void> {
    const source = { file: batch.input_file_id, chunks: parts.map((part) => part.chunk) };
    const lines = joinPacked(
      parts.map((part) => part.lines),
      source,
      (from) => this.client.files.packedRows(from.file, from.chunks),
    );
    // packed lines are features alone: no body of their own (no timeout_ms) to read
    const views = lines.urls.map((url) => ({ url, body: PLAIN_BODY }));
    const answers = await this.many(batch, views, signal, (opts) => runPacked(lines, opts, signal));
    if (!answers) return;
    let at = 0;
    for (const { chunk, first, lines: part } of parts) {
      const count = part.customIds.length;
      const own = answers.slice(at, at + count);
      at += count;
      await this.keepChunk(batch, chunk, first, part.customIds, own, hold, linked);
    }
  }

  /** A chunk's answers rendered (off the loop where it can) and kept as one value. */
  private async keepChunk(
    batch: OpenAiBatchState,
    chunk: number,
    first: number,
    customIds: string[],
    answers: readonly Answer[],
    hold: (bytes: number) => Promise<void>,
    linked: LinkedOutput | undefined,
  ): Promise<void> {
    // a request id per line, as OpenAI's: the chunk's random part, then the line's place
    const ids = randomUUID().replaceAll("-", "").slice(0, 24);
    const { encoded, ok, failed } = this.render
      ? await this.render(answerPlan(batch.id, first, ids, customIds, answers))
      : renderAnswers(answerPlan(batch.id, first, ids, customIds, answers, false));
    await hold(encoded.byteLength);
    const value = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    const fresh = await this.client.openAiBatches.recordChunk(batch.id, chunk, ok, failed, value);
    // another runner's answers were kept first: the files take theirs, from the finalizer
    if (fresh) linked?.kept(chunk, value);
    else linked?.giveUp();
  }

  /** A group of lines' call options; undefined once the batch's window has passed. */
  private manyOptions(batch: OpenAiBatchState): CallOptions | undefined {
    return lineCallOptions(batch, `req_${randomUUID().replaceAll("-", "")}`);
  }

  /** Runs many lines through their kind at once and keeps each answer. */
  async group(
    batch: OpenAiBatchState,
    many: ManyLines,
    group: ReadonlyArray<{ index: number; line: ParsedLine }>,
    signal: AbortSignal,
    recorder: AnswerRecorder,
  ): Promise<void> {
    const parsed = group.map((g) => g.line);
    const answers = await this.many(batch, parsed, signal, (opts) =>
      many.run(parsed, opts, signal),
    );
    if (!answers) return;
    await Promise.all(
      group.map((line, k) =>
        this.keep(
          batch,
          line.index,
          line.line.custom_id,
          `req_${randomUUID().replaceAll("-", "")}`,
          answers[k] as Answer,
          recorder,
        ),
      ),
    );
  }

  /**
   * Lines answered through their kind at once, each as its route answers it (a kind that
   * throws fails them all); undefined once the batch stopped or its window has passed.
   */
  private async many(
    batch: OpenAiBatchState,
    lines: ReadonlyArray<{ url: string; body: unknown }>,
    signal: AbortSignal,
    run: (opts: CallOptions) => Promise<LineOutcome[] | undefined>,
  ): Promise<Answer[] | undefined> {
    for (;;) {
      const opts = this.manyOptions(batch);
      if (signal.aborted || !opts) return undefined;
      let outcomes: LineOutcome[] | undefined;
      try {
        outcomes = await run(opts);
      } catch (err) {
        outcomes = lines.map(() => ({ error: err }));
      }
      if (!outcomes || signal.aborted) return undefined;
      if (allOutOfTheirHour(lines, outcomes, opts)) continue;
      const answered = outcomes;
      return lines.map(({ url }, k) => {
        const outcome = answered[k] ?? { error: new FerryError("INTERNAL", "no answer") };
        return "value" in outcome
          ? { status: 200, body: outcome.value }
          : this.failed(batch, url, opts.requestId ?? "", outcome.error);
      });
    }
  }

  /** Runs one line and keeps its answer; a line the batch stopped first keeps none. */
  async line(
    batch: OpenAiBatchState,
    index: number,
    raw: string,
    signal: AbortSignal,
    recorder: AnswerRecorder,
  ): Promise<void> {
    const { custom_id, url, body } = parseLine(raw) as ParsedLine;
    const requestId = `req_${randomUUID().replaceAll("-", "")}`;
    const answer = await this.answer(batch, url, body, requestId, signal);
    if (!answer) return;
    await this.keep(batch, index, custom_id, requestId, answer, recorder);
  }

  /** Keeps a line's answer as its output (or error) file line. */
  private async keep(
    batch: OpenAiBatchState,
    index: number,
    custom_id: string,
    requestId: string,
    answer: Answer,
    recorder: AnswerRecorder,
  ): Promise<void> {
    const ok = answer.status < 400;
    const line = answerLine(
      lineId(batch.id, index),
      custom_id,
      answer.status,
      requestId,
      answer.body,
    );
    await recorder.record({ index, ok, line: `${ok ? OK : FAILED}${line}` });
  }

  /**
   * The line's answer as its route would give it, waiting out full queues and a model that is
   * unavailable for now; undefined once the batch has stopped.
   */
  private async answer(
    batch: OpenAiBatchState,
    url: string,
    body: unknown,
    requestId: string,
    signal: AbortSignal,
  ): Promise<Answer | undefined> {
    const endpoint = endpointOf(url)?.endpoint;
    const kind = endpoint === undefined ? undefined : this.kinds.get(endpoint);
    for (let attempt = 0; ; attempt++) {
      const opts = lineCallOptions(batch, requestId);
      if (signal.aborted || !opts) return undefined;
      try {
        if (!kind) throw new FerryError("NOT_FOUND", `No route for POST ${url}`);
        return { status: 200, body: await kind.run(url, body, opts, signal) };
      } catch (err) {
        if (signal.aborted) return undefined;
        const error = toFerryError(err);
        if (WAITED_OUT.includes(error.code)) {
          await pause(refusalBackoffMs(attempt, error), signal);
          continue;
        }
        // it waited out the hour one call may wait, not a deadline of its own, and the batch's
        // window is still open: it waits on, as a line of OpenAI's waits out its window
        if (error.code === "DEADLINE_EXCEEDED" && onlyCapped(opts, body)) continue;
        return this.failed(batch, url, requestId, error);
      }
    }
  }

  /** A line's error as its route answers it. */
  private failed(batch: OpenAiBatchState, url: string, requestId: string, err: unknown): Answer {
    const error = toFerryError(err);
    if (error.code === "INTERNAL")
      this.log.error({ err, batch: batch.id, requestId }, "batch line failed");
    return { status: httpStatus(error.code), body: errorBody(url, error) };
  }
}

/**
 * A batch line's call options (or a group's): the batch's tenant, the lowest priority, the
 * deadline its window leaves (an hour at most), choices that wait for room and logs kept a
 * minute; undefined once the window has passed.
 */
function lineCallOptions(batch: OpenAiBatchState, requestId: string): CallOptions | undefined {
  const left = batch.expires_at * 1000 - Date.now();
  if (left <= 0) return undefined;
  return {
    requestId,
    tenant: { id: batch.owner, admin: false },
    priority: BATCH_PRIORITY,
    timeoutMs: Math.min(left, MAX_TIMEOUT_MS),
    waitsOutFullQueues: true,
    keepForS: LINE_KEEP_S,
  };
}

/**
 * Whether a call's deadline was only the hour any one call may wait (MAX_TIMEOUT_MS), with the
 * batch's window further off, and not the line's own `timeout_ms`: a line past that hour has not
 * run out its time, only its call's.
 */
function onlyCapped(opts: CallOptions, body: unknown): boolean {
  const own = (body as { timeout_ms?: unknown } | null)?.timeout_ms;
  return opts.timeoutMs === MAX_TIMEOUT_MS && !(typeof own === "number" && own < MAX_TIMEOUT_MS);
}

/**
 * Whether every line ran out of the hour one call may wait, none by a deadline of its own,
 * with the batch's window still open: then they run again (nothing of them was answered).
 */
function allOutOfTheirHour(
  lines: ReadonlyArray<{ body: unknown }>,
  outcomes: readonly LineOutcome[],
  opts: CallOptions,
): boolean {
  return (
    lines.length > 0 &&
    lines.every((line, k) => {
      const outcome = outcomes[k];
      return (
        outcome !== undefined &&
        "error" in outcome &&
        toFerryError(outcome.error).code === "DEADLINE_EXCEEDED" &&
        onlyCapped(opts, line.body)
      );
    })
  );
}
