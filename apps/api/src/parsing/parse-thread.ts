import type { Worker } from "node:worker_threads";
import { spawnThread } from "@ferry/protocol";
import type { AnswerPlan, RenderedAnswers } from "../batches/answer-plan.js";
import type { ParsedJsonBatch } from "../batches/json-batch-body.js";
import type { ParsedRows, RowsSpec } from "../batches/ndjson-rows.js";
import type { CheckedLines } from "../files/input-lines.js";

/**
 * What the thread is asked: a segment of NDJSON rows, a chunk of a batch input file, or a
 * batch's stored chunk of answers to render as its result lines.
 */
type ParseAsk =
  | { kind: "rows"; bytes: Uint8Array; spec: RowsSpec }
  | { kind: "input-lines"; bytes: Uint8Array; firstLine: number }
  | { kind: "result-lines"; bytes: Uint8Array }
  | { kind: "answers"; plan: AnswerPlan }
  | { kind: "json-batch"; bytes: Uint8Array; fingerprintHead?: string };
export type ParseRequest = { id: number } & ParseAsk;

type Reply = { id: number; result: unknown } | { id: number; failure: string };

/** What the thread is started with. */
export interface ParseThreadData {
  /** Its nice value: everything it does is offline work. */
  nice: number;
  /** `InteractiveLoad.shared`: its pieces wait while interactive requests are in flight. */
  interactive?: SharedArrayBuffer;
}

/** Heap bytes the thread keeps room for per byte of the largest body (~23 measured, and headroom). */
const HEAP_PER_BODY_BYTE = 32;

/**
 * Uploads parsed on a thread of their own (NDJSON batch rows, OpenAI batch input lines), and
 * batch results rendered there: the API's event loop only cuts a body into pieces of whole
 * lines, or reads stored answers, and acts on what comes back, so an upload's parsing runs
 * beside its receiving and a result file's rendering beside its sending (and beside every
 * other request the API serves) instead of on the same loop. One thread per API process,
 * started on first use; pieces take their turn on it in the order they were sent.
 */
export class ParseThread {
  private thread: Worker | undefined;
  private next = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (result: unknown) => void; reject: (err: Error) => void }
  >();

  constructor(
    /** The largest body the thread may be given whole (MAX_BODY_BYTES): its heap is sized to it. */
    private readonly maxBodyBytes = 8 * 2 ** 20,
    /** The thread's nice value (PARSE_THREAD_NICE; `lowerThreadPriority`); 0 leaves it. */
    private readonly nice = 0,
    /** The API's interactive requests in flight (`InteractiveLoad`), which pieces wait for. */
    private readonly interactive?: SharedArrayBuffer,
  ) {}

  /**
   * `bytes` (whole lines, a buffer of their own) parsed into rows as `spec` says; the buffer
   * moves to the thread (the caller no longer holds it).
   */
  rows(bytes: Uint8Array, spec: RowsSpec): Promise<ParsedRows> {
    return this.ask({ kind: "rows", bytes, spec }) as Promise<ParsedRows>;
  }

  /**
   * A stored chunk of a batch's answers (`encodeChunkOutput`'s bytes, copied) rendered as its
   * NDJSON result lines, as UTF-8.
   */
  resultLines(chunkOutput: Uint8Array): Promise<Uint8Array> {
    // a copy of its own to move: a Redis reply may be a view of a larger buffer
    return this.ask({
      kind: "result-lines",
      bytes: new Uint8Array(chunkOutput),
    }) as Promise<Uint8Array>;
  }

  /** A chunk of an OpenAI batch's answers rendered as its files' lines (the plan is copied). */
  answers(plan: AnswerPlan): Promise<RenderedAnswers> {
    return this.ask({ kind: "answers", plan }) as Promise<RenderedAnswers>;
  }

  /**
   * A `{model, items}` batch body (a buffer of its own: it moves) read into keys and features
   * (`parseJsonBatch`), fingerprinted when `fingerprintHead` is given.
   */
  jsonBatch(bytes: Uint8Array, fingerprintHead?: string): Promise<ParsedJsonBatch> {
    return this.ask({
      kind: "json-batch",
      bytes,
      ...(fingerprintHead === undefined ? {} : { fingerprintHead }),
    }) as Promise<ParsedJsonBatch>;
  }

  /** Whole lines of a batch input file checked (a copy), the first of them line `firstLine`. */
  inputLines(bytes: Uint8Array, firstLine: number): Promise<CheckedLines> {
    return this.ask({ kind: "input-lines", bytes, firstLine }) as Promise<CheckedLines>;
  }

  async close(): Promise<void> {
    const thread = this.thread;
    this.thread = undefined;
    await thread?.terminate();
  }

  private ask(request: ParseAsk): Promise<unknown> {
    const thread = this.started();
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      // a segment of rows, a chunk of stored answers and a plan's values (cut for it by
      // `answerPlan`) are the caller's to give (they move); an input file's chunk is stored
      // once checked (it is copied)
      const transfer =
        request.kind === "rows" || request.kind === "result-lines" || request.kind === "json-batch"
          ? [request.bytes.buffer as ArrayBuffer]
          : request.kind === "answers"
            ? request.plan.outputs.map(({ values }) => values.buffer as ArrayBuffer)
            : [];
      thread.postMessage({ ...request, id }, transfer);
    });
  }

  private started(): Worker {
    if (this.thread) return this.thread;
    // its heap holds two pieces' lines and rows at a time, but one input file line or JSON
    // batch body may be MAX_BODY_BYTES of JSON: 8 MB of empty objects took ~185 MB once
    // parsed, and 12 MB would have run a 256 MB heap out, every piece waiting on it with it
    const heapMb = Math.max(256, Math.ceil((HEAP_PER_BODY_BYTE * this.maxBodyBytes) / 2 ** 20));
    const data: ParseThreadData = {
      nice: this.nice,
      ...(this.interactive ? { interactive: this.interactive } : {}),
    };
    const thread = spawnThread(new URL("./parse-thread-body.js", import.meta.url), data, {
      maxOldGenerationSizeMb: heapMb,
      maxYoungGenerationSizeMb: 16,
    });
    // an idle parser does not keep the process alive
    thread.unref();
    thread.on("message", (reply: Reply) => {
      const waiter = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (!waiter) return;
      if ("result" in reply) waiter.resolve(reply.result);
      else waiter.reject(new Error(`the parse thread failed: ${reply.failure}`));
    });
    const lost = (err: Error) => {
      if (this.thread === thread) this.thread = undefined;
      for (const waiter of this.waiting.values()) waiter.reject(err);
      this.waiting.clear();
    };
    thread.on("error", lost);
    thread.on("exit", (code) => lost(new Error(`the parse thread exited (${code})`)));
    this.thread = thread;
    return thread;
  }
}
