import type { Queue } from "bullmq";
import type { RedisClient } from "../shared/connection.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";
import { assertReady, guarded } from "../shared/redis-guard.js";
import { WriterFencedError } from "./file-store.js";
import { RUN_ATTEMPTS } from "./openai-batch-runs.js";
import {
  ANSWERED,
  CREATE,
  FINISH,
  RECORD_CHUNK,
  RECORD_MANY,
  SCAN_FIELDS,
  TRANSITION,
} from "./openai-batch-scripts.js";
import { type ListPage, OwnerIndex, sortTime } from "./owner-index.js";

export type OpenAiBatchStatus =
  | "validating"
  | "failed"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "cancelling"
  | "cancelled";

/** The statuses a batch ends in. */
export const FINAL_BATCH_STATUSES: readonly OpenAiBatchStatus[] = [
  "failed",
  "completed",
  "expired",
  "cancelled",
];

/** The moments a batch passes, in Unix seconds, each set once. */
const MOMENTS = [
  "in_progress_at",
  "finalizing_at",
  "completed_at",
  "failed_at",
  "expired_at",
  "cancelling_at",
  "cancelled_at",
] as const;
type Moment = (typeof MOMENTS)[number];

/** An OpenAI-shaped batch as Redis keeps it (timestamps in Unix seconds). */
export interface OpenAiBatchState extends Partial<Record<Moment, number>> {
  id: string;
  owner: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: OpenAiBatchStatus;
  created_at: number;
  expires_at: number;
  /** Lines of the input file. */
  total: number;
  /** Lines answered 2xx, and lines answered with an error. */
  completed: number;
  failed: number;
  output_file_id?: string;
  error_file_id?: string;
  metadata: Record<string, string> | null;
  /** Why a batch failed, OpenAI's `errors` list. */
  errors: unknown;
}

export type NewOpenAiBatch = Pick<
  OpenAiBatchState,
  | "id"
  | "owner"
  | "endpoint"
  | "input_file_id"
  | "completion_window"
  | "created_at"
  | "expires_at"
  | "total"
  | "metadata"
>;

/** The field that keeps a chunk's answers whole, beside the lines' own (their indexes). */
const chunkField = (chunk: number) => `c${chunk}`;

/** What is answered of one chunk of a batch's input file. */
export interface ChunkAnswered {
  /** Whether each of its lines has an answer of its own. */
  lines: boolean[];
  /** Whether its answers are kept whole (`recordChunk`): every line of it is answered. */
  whole: boolean;
}

/** One line's answer as `recordMany` keeps it. */
export interface RecordedLine {
  index: number;
  ok: boolean;
  line: string;
}

/** Lines' answers read in one round trip when a batch's answers are read in field order. */
const ANSWERS_PAGE = 256;

/**
 * OpenAI-shaped batches (the Batch API): each batch's state and counts in a hash, each line's
 * answer in a second hash, written once per line, and a BullMQ job per batch on one queue,
 * which every API process runs (`OpenAiBatchRuns`).
 */
export class OpenAiBatchStore {
  private readonly createScript: LuaCommand<number>;
  private readonly transitionScript: LuaCommand<number>;
  private readonly recordManyScript: LuaCommand<number>;
  private readonly recordChunkScript: LuaCommand<number>;
  private readonly finishScript: LuaCommand<number>;
  private readonly answeredScript: LuaCommand<string>;
  private readonly scanFieldsScript: LuaCommand<[string, string[]]>;
  private readonly index: OwnerIndex;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly queue: () => Queue,
  ) {
    this.createScript = new LuaCommand(redis, "ferryCreateOpenAiBatch", 1, CREATE);
    this.transitionScript = new LuaCommand(redis, "ferryOpenAiBatchTransition", 1, TRANSITION);
    this.recordManyScript = new LuaCommand(redis, "ferryRecordOpenAiBatchLines", 2, RECORD_MANY);
    this.recordChunkScript = new LuaCommand(redis, "ferryRecordOpenAiBatchChunk", 2, RECORD_CHUNK);
    this.finishScript = new LuaCommand(redis, "ferryFinishOpenAiBatchKeeping", 2, FINISH);
    this.answeredScript = new LuaCommand(redis, "ferryOpenAiBatchAnswered", 1, ANSWERED);
    this.scanFieldsScript = new LuaCommand(redis, "ferryScanHashFields", 1, SCAN_FIELDS);
    this.index = new OwnerIndex(redis, (owner) => keys.openAiBatches(owner));
  }

  /**
   * Creates a batch, to run on some replica, kept `ttlS`; returns it as it stands (a retry
   * finds the first's). Its run is queued before its state is written: a creator that dies
   * between the two leaves a run that finds no batch and ends, never a batch without a run.
   */
  async create(batch: NewOpenAiBatch, ttlS: number): Promise<OpenAiBatchState> {
    assertReady(this.redis);
    await guarded(() =>
      this.queue().add(
        "run",
        { batch: batch.id },
        {
          jobId: batch.id,
          removeOnComplete: true,
          removeOnFail: true,
          attempts: RUN_ATTEMPTS,
          backoff: { type: "exponential", delay: 1_000 },
        },
      ),
    );
    const fields: Array<string | number> = [];
    const state = {
      ...batch,
      status: "validating",
      completed: 0,
      failed: 0,
      metadata: JSON.stringify(batch.metadata),
    };
    for (const [k, v] of Object.entries(state)) fields.push(k, v);
    await guarded(() =>
      this.createScript.run(this.redis, this.keys.openAiBatch(batch.id), ttlS, ...fields),
    );
    // in ms, not created_at's whole seconds: batches made within one second list newest first
    await this.index.add(batch.owner, batch.id, sortTime(batch.created_at), ttlS);
    const created = await this.get(batch.id);
    if (!created) throw new Error(`batch ${batch.id} was not written`);
    return created;
  }

  async get(id: string): Promise<OpenAiBatchState | undefined> {
    assertReady(this.redis);
    return parseBatch(await guarded(() => this.redis.hgetall(this.keys.openAiBatch(id))));
  }

  /** A batch's status alone (a runner watching for a cancel). */
  async status(id: string): Promise<OpenAiBatchStatus | undefined> {
    const status = await guarded(() => this.redis.hget(this.keys.openAiBatch(id), "status"));
    return (status ?? undefined) as OpenAiBatchStatus | undefined;
  }

  /**
   * A new writer number for the batch's output and error files, higher than any before (see
   * FileStore.begin): a runner that finalizes later fences out one that began earlier.
   */
  async finalizer(id: string): Promise<string> {
    const n = await guarded(() => this.redis.hincrby(this.keys.openAiBatch(id), "finalizer", 1));
    return String(n);
  }

  /** A page of `owner`'s batches, newest first. */
  list(owner: string, page: ListPage) {
    assertReady(this.redis);
    return this.index.page(owner, page, (ids) => Promise.all(ids.map((id) => this.get(id))));
  }

  /**
   * Moves a batch to `to` if its status is one of `from`; the moment `to` names (`<to>_at`) is
   * set once. False when its status was another.
   */
  async transition(
    id: string,
    from: readonly OpenAiBatchStatus[],
    to: OpenAiBatchStatus,
  ): Promise<boolean> {
    const moment = MOMENTS.includes(`${to}_at` as Moment) ? `${to}_at` : "";
    const now = Math.floor(Date.now() / 1000);
    const moved = await guarded(() =>
      this.transitionScript.run(this.redis, this.keys.openAiBatch(id), to, moment, now, ...from),
    );
    return moved === 1;
  }

  /**
   * What is answered of the input file's chunk `chunk`, its lines `from`..`from + count - 1`:
   * each line's own answer, and the chunk's answers kept whole.
   */
  async answered(id: string, chunk: number, from: number, count: number): Promise<ChunkAnswered> {
    const key = this.keys.openAiBatchLines(id);
    const marks = await guarded(() =>
      this.answeredScript.run(this.redis, key, from, count, chunkField(chunk)),
    );
    return {
      lines: Array.from({ length: count }, (_, k) => marks.charCodeAt(k) === 0x31),
      whole: marks.charCodeAt(count) === 0x31,
    };
  }

  /** Whether any answer of the batch is kept yet (none: its first run, nothing to skip). */
  async anyAnswered(id: string): Promise<boolean> {
    return (await guarded(() => this.redis.hlen(this.keys.openAiBatchLines(id)))) > 0;
  }

  /** Chunk `chunk`'s answers kept whole (`recordChunk`'s value), if they were. */
  async chunkAnswers(id: string, chunk: number): Promise<Buffer | null> {
    return guarded(() => this.redis.hgetBuffer(this.keys.openAiBatchLines(id), chunkField(chunk)));
  }

  /**
   * Every answer kept past a point, for a batch whose input file went before it was written
   * out: the lines' own from line `fromLine` on, in their order, then the chunks' whole ones
   * after chunk `afterChunk`, in theirs (which lines a chunk holds is the input's to say). Read
   * a page at a time in that order: only the answers' field names are held, not the answers.
   */
  async *answersAfter(
    id: string,
    fromLine: number,
    afterChunk: number,
  ): AsyncGenerator<{ line: string } | { chunk: Buffer }> {
    // by field: HSCAN may return a field twice
    const lines = new Set<number>();
    const chunks = new Set<number>();
    const key = this.keys.openAiBatchLines(id);
    let cursor = "0";
    do {
      const [next, names] = await guarded(() =>
        this.scanFieldsScript.run(this.redis, key, cursor, 256),
      );
      cursor = next;
      for (const field of names) {
        if (field.startsWith("c")) {
          const chunk = Number(field.slice(1));
          if (chunk > afterChunk) chunks.add(chunk);
        } else if (Number(field) >= fromLine) lines.add(Number(field));
      }
    } while (cursor !== "0");
    const inOrder = (all: Set<number>) => [...all].sort((a, b) => a - b);
    const ordered = inOrder(lines);
    for (let at = 0; at < ordered.length; at += ANSWERS_PAGE) {
      const fields = ordered.slice(at, at + ANSWERS_PAGE).map(String);
      const answers = await guarded(() => this.redis.hmget(key, ...fields));
      for (const line of answers) if (line !== null) yield { line };
    }
    for (const chunk of inOrder(chunks)) {
      const answers = await guarded(() => this.redis.hgetBuffer(key, chunkField(chunk)));
      if (answers !== null) yield { chunk: answers };
    }
  }

  /** The answers of the lines `from`..`from + count - 1` (null: not answered). */
  async lineAnswers(id: string, from: number, count: number): Promise<Array<string | null>> {
    if (count === 0) return [];
    const fields = Array.from({ length: count }, (_, k) => String(from + k));
    return guarded(() => this.redis.hmget(this.keys.openAiBatchLines(id), ...fields));
  }

  /**
   * Keeps a whole chunk's answers as one value (`answers`), counted: `completed` answered 2xx
   * and `failed` not; false when the chunk had them already.
   */
  async recordChunk(
    id: string,
    chunk: number,
    completed: number,
    failed: number,
    answers: Buffer,
  ): Promise<boolean> {
    const keys = [this.keys.openAiBatch(id), this.keys.openAiBatchLines(id)];
    const fresh = await guarded(() =>
      this.recordChunkScript.run(
        this.redis,
        ...keys,
        chunkField(chunk),
        completed,
        failed,
        answers,
      ),
    );
    return fresh === 1;
  }

  /** Keeps and counts many lines' answers in one round trip; how many had none before. */
  async recordMany(id: string, answers: readonly RecordedLine[]): Promise<number> {
    if (answers.length === 0) return 0;
    const keys = [this.keys.openAiBatch(id), this.keys.openAiBatchLines(id)];
    const args: Array<string | number> = [];
    for (const a of answers) args.push(a.index, a.ok ? "1" : "0", a.line);
    return guarded(() => this.recordManyScript.run(this.redis, ...keys, ...args));
  }

  /** Ends a batch in `status` with `fields` (its files, its errors), kept `ttlS` from now. */
  async finish(
    id: string,
    status: OpenAiBatchStatus,
    fields: Record<string, string | number>,
    ttlS: number,
    /** The finalizer ending it (`finalizer`): refused once a later one has begun. */
    writer = "",
    /** Its files are links to its kept answers (`FileStore.finishLinked`): they stay as long. */
    keepAnswers = false,
  ): Promise<void> {
    const now = Math.floor(Date.now() / 1000);
    const all: Record<string, string | number> = { ...fields, status };
    if (MOMENTS.includes(`${status}_at` as Moment)) all[`${status}_at`] = now;
    const flat = Object.entries(all).flat();
    const keys = [this.keys.openAiBatch(id), this.keys.openAiBatchLines(id)];
    const ended = await guarded(() =>
      this.finishScript.run(this.redis, ...keys, ttlS, writer, keepAnswers ? "keep" : "", ...flat),
    );
    if (ended === 0 && writer !== "") throw new WriterFencedError(id);
    const batch = await this.get(id);
    if (batch) await this.index.keep(batch.owner, id, ttlS);
  }
}

function parseBatch(raw: Record<string, string>): OpenAiBatchState | undefined {
  if (!raw.id) return undefined;
  const moments: Partial<Record<Moment, number>> = {};
  for (const m of MOMENTS) if (raw[m] !== undefined) moments[m] = Number(raw[m]);
  return {
    ...moments,
    id: raw.id,
    owner: raw.owner ?? "",
    endpoint: raw.endpoint ?? "",
    input_file_id: raw.input_file_id ?? "",
    completion_window: raw.completion_window ?? "",
    status: (raw.status ?? "validating") as OpenAiBatchStatus,
    created_at: Number(raw.created_at ?? 0),
    expires_at: Number(raw.expires_at ?? 0),
    total: Number(raw.total ?? 0),
    completed: Number(raw.completed ?? 0),
    failed: Number(raw.failed ?? 0),
    ...(raw.output_file_id ? { output_file_id: raw.output_file_id } : {}),
    ...(raw.error_file_id ? { error_file_id: raw.error_file_id } : {}),
    metadata: raw.metadata ? (JSON.parse(raw.metadata) as Record<string, string> | null) : null,
    errors: raw.errors ? JSON.parse(raw.errors) : null,
  };
}
