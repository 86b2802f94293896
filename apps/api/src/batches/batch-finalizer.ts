import { decodeChunkAnswers } from "@ferry/protocol";
import {
  FINAL_BATCH_STATUSES,
  type InferenceClient,
  linesOf,
  type OpenAiBatchStatus,
  type StoredFile,
  WriterFencedError,
} from "@ferry/transport";
import { ADMIN_ID } from "../http/tenant.js";
import { answersHoldId, notRun } from "./batch-lines.js";
import type { LinkedOutput } from "./linked-output.js";
import { batchOutputFile, type OutputFile } from "./output-file.js";

/** Ends a batch that cannot run, saying why, with the files of what was answered (if any). */
export type FailBatch = (
  id: string,
  message: string,
  files?: { output_file_id?: string; error_file_id?: string },
  /** The finalizer failing it (`OpenAiBatchStore.finalizer`), fenced as `finish` is. */
  writer?: string,
) => Promise<void>;

/** Ends a batch that cannot run, saying why, with the files of what it answered. */
export function failBatch(client: InferenceClient, ttlS: number): FailBatch {
  return async (id, message, files = {}, writer = "") => {
    const batch = await client.openAiBatches.get(id);
    if (!batch || FINAL_BATCH_STATUSES.includes(batch.status)) return;
    // its answers no longer count against its owner's storage (its files, if any, do)
    await client.storage.release(batch.owner, answersHoldId(id)).catch(() => undefined);
    const errors = {
      object: "list",
      data: [
        { code: "batch_failed", message: `Batch failed: ${message}`, param: null, line: null },
      ],
    };
    await client.openAiBatches.finish(
      id,
      "failed",
      { ...files, errors: JSON.stringify(errors) },
      ttlS,
      writer,
    );
  };
}

/** A kept answer's first character: whether it goes to the output file or the error file. */
export const OK = "1";
export const FAILED = "0";

/**
 * Writes the output and error files from the kept answers, in the input file's order (a line
 * not run goes to the error file as OpenAI has it), and ends the batch. Written afresh
 * whole if a runner dies midway, under the same file ids; a runner that lost its batch while
 * it lived (its lock lapsed, another took over and began the files again) stops writing them
 * and leaves the batch to the other. A run that kept every line in chunks of its own, fresh,
 * has its files made links to them (`LinkedOutput`), and the answers kept as long.
 */
export async function finalizeBatch(
  client: InferenceClient,
  id: string,
  ttlS: number,
  fail: FailBatch,
  /** Why the run stopped short (its owner's storage is full): the batch fails, with its files. */
  failure?: string,
  /** What the run kept, for files linked to it, if it ran the batch from its start. */
  linked?: LinkedOutput,
): Promise<void> {
  try {
    await writeAndEnd(client, id, ttlS, fail, failure, linked);
  } catch (err) {
    if (!(err instanceof WriterFencedError)) throw err;
  }
}

async function writeAndEnd(
  client: InferenceClient,
  id: string,
  ttlS: number,
  fail: FailBatch,
  failure: string | undefined,
  linked: LinkedOutput | undefined,
): Promise<void> {
  const store = client.openAiBatches;
  let batch = await store.get(id);
  if (!batch || FINAL_BATCH_STATUSES.includes(batch.status)) return;
  if (batch.status !== "cancelling" && batch.status !== "finalizing") {
    await store.transition(id, ["validating", "in_progress"], "finalizing");
    batch = (await store.get(id)) ?? batch;
  }
  const ending: OpenAiBatchStatus =
    batch.status === "cancelling"
      ? "cancelled"
      : failure !== undefined
        ? "failed"
        : batch.completed + batch.failed < batch.total
          ? "expired"
          : "completed";
  if (linked && ending === "completed" && failure === undefined) {
    // the run kept every line in chunks of its own: the files link to them, nothing to copy
    const made = await linked.link(client, batch, batch.total);
    if (made) {
      const files = await settleBoth(client, batch, made);
      return store.finish(id, ending, files, ttlS, linked.writer, true);
    }
  }
  const files = client.files;
  const writer = await store.finalizer(id);
  const output = batchOutputFile(files, batch, "output", writer);
  const errors = batchOutputFile(files, batch, "error", writer);
  await output.begin();
  await errors.begin();
  let index = 0;
  // a chunk answered whole needs nothing of the input file: only a chunk answered a line at a
  // time (a runner taken over midway, lines of generation) is read again for its lines
  const readAhead = (chunk: number) => {
    const read = store.chunkAnswers(id, chunk);
    // awaited later: a failure meanwhile is not an unhandled rejection
    read.catch(() => undefined);
    return read;
  };
  let answered = readAhead(0);
  /** At the loop's end, the chunk the input file ended at (past its last, unless it went). */
  let chunk = 0;
  for (; ; chunk++) {
    const whole = await answered;
    answered = readAhead(chunk + 1);
    if (whole !== null) {
      const { ok, failed } = decodeChunkAnswers(whole);
      await output.addBlock(ok);
      await errors.addBlock(failed);
      index += ok.lines + failed.lines;
      continue;
    }
    const bytes = await files.chunk(batch.input_file_id, chunk);
    if (!bytes) break;
    const lines = linesOf(bytes);
    const answers = await store.lineAnswers(id, index, lines.length);
    for (let k = 0; k < lines.length; k++) {
      const answer = answers[k];
      if (answer === null || answer === undefined)
        await errors.add(notRun(id, index + k, lines[k] ?? "", ending));
      else if (answer.startsWith(OK)) await output.add(answer.slice(1));
      else await errors.add(answer.slice(1));
    }
    index += lines.length;
  }
  if (index < batch.total) {
    // the input file went (deleted) before every line was written out: which lines the rest
    // of its chunks held is not known any more, but every answer kept is, and is counted
    let kept = 0;
    for await (const answer of store.answersAfter(id, index, chunk)) {
      if ("line" in answer) {
        kept++;
        if (answer.line.startsWith(OK)) await output.add(answer.line.slice(1));
        else await errors.add(answer.line.slice(1));
        continue;
      }
      const { ok, failed } = decodeChunkAnswers(answer.chunk);
      await output.addBlock(ok);
      await errors.addBlock(failed);
      kept += ok.lines + failed.lines;
    }
    const files = await closeBoth(client, batch, output, errors);
    // every line answered: the batch ends as it would have
    if (index + kept >= batch.total) return store.finish(id, ending, files, ttlS, writer);
    // cancelled: so it ends, but the lines it did not run could not be written to its error
    // file (their custom_ids went with the input): its errors say how many, and why
    if (ending === "cancelled") {
      const missing = batch.total - index - kept;
      const said = {
        object: "list",
        data: [
          {
            code: "input_file_deleted",
            message: `${missing} of its ${batch.total} lines were not run and are in neither file: its input file ${batch.input_file_id} was deleted before the cancel could write them to the error file`,
            param: null,
            line: null,
          },
        ],
      };
      return store.finish(id, ending, { ...files, errors: JSON.stringify(said) }, ttlS, writer);
    }
    const missing = batch.total - index - kept;
    return fail(
      id,
      `its input file ${batch.input_file_id} was deleted before every line had run: ${missing} of its ${batch.total} lines were not run and are in neither file; the answers kept are in its files`,
      files,
      writer,
    );
  }
  const closed = await closeBoth(client, batch, output, errors);
  if (failure !== undefined && ending === "failed") return fail(id, failure, closed, writer);
  await store.finish(id, ending, closed, ttlS, writer);
}

/**
 * Closes both files, each counted in its owner's file storage (the quota its uploads are
 * held to: a batch's output is what it keeps too, until deleted or expired), in place of its
 * answers' hold there; the ids of those that got a line.
 */
async function closeBoth(
  client: InferenceClient,
  batch: { id: string; owner: string },
  output: OutputFile,
  errors: OutputFile,
): Promise<{ output_file_id?: string; error_file_id?: string }> {
  return settleBoth(client, batch, { output: await output.close(), errors: await errors.close() });
}

/**
 * Both files, each counted in its owner's file storage in place of its answers' hold there;
 * the ids of those made.
 */
async function settleBoth(
  client: InferenceClient,
  batch: { id: string; owner: string },
  written: { output?: StoredFile | undefined; errors?: StoredFile | undefined },
): Promise<{ output_file_id?: string; error_file_id?: string }> {
  let from = answersHoldId(batch.id);
  for (const file of [written.output, written.errors])
    if (file && file.owner !== ADMIN_ID) {
      // never refused (the answers are computed) and never failing the batch: a file not
      // counted is what a failed count leaves
      const settled = await client.storage
        .settle(file.owner, file.id, file.bytes, file.expires_at, from)
        .then(
          () => true,
          () => false,
        );
      // the answers' hold goes with the first file counted (or on its own, below)
      if (settled) from = "";
    }
  if (from !== "") await client.storage.release(batch.owner, from).catch(() => undefined);
  return {
    ...(written.output ? { output_file_id: written.output.id } : {}),
    ...(written.errors ? { error_file_id: written.errors.id } : {}),
  };
}
