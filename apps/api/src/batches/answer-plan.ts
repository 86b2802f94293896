import { ChunkAnswers } from "@ferry/protocol";
import { isPackedRow } from "../http/batch-line.js";
import { answerLineOf, lineId } from "./batch-lines.js";

/** A line's answer as its route gave it: a status and its body. */
export interface LineAnswer {
  status: number;
  body: unknown;
}

/** The values of one packed run a chunk's predictions are read from. */
interface PlannedOutput {
  values: Float32Array;
  width: number;
  version: string;
  latencyMs: number;
}

/**
 * A chunk of an OpenAI batch's answers, ready to render as its output and error file lines
 * (`renderAnswers`) where the API's loop is not: predictions as their packed values (a row of
 * a run's output), every other answer as its body's JSON. Typed arrays and strings only, so
 * that it crosses to a thread as a few copies.
 */
export interface AnswerPlan {
  batch: string;
  /** The chunk's first line's place in the input file. */
  first: number;
  /** The random part of the chunk's request ids (a line's place in the chunk follows it). */
  requestIds: string;
  customIds: string[];
  outputs: PlannedOutput[];
  /** Each line's run in `outputs`, or -1 where `fixed` holds its answer. */
  output: Int32Array;
  /** Each line's row in its run's values. */
  row: Int32Array;
  fixed: Record<number, { status: number; body: string }>;
}

/** A chunk's answers as `ChunkAnswers` keeps them, and how many lines each block holds. */
export interface RenderedAnswers {
  encoded: Uint8Array;
  ok: number;
  failed: number;
}

/** The plan of a chunk's answers, `answers[k]` the answer of its line k. */
export function answerPlan(
  batch: string,
  first: number,
  requestIds: string,
  customIds: string[],
  answers: readonly LineAnswer[],
  /** false: predictions too are carried as their JSON (rendered where the plan is made). */
  packRows = true,
): AnswerPlan {
  const outputs: PlannedOutput[] = [];
  const runs = new Map<Float32Array, number>();
  /** The first and last row each run's lines read. */
  const spans: Array<{ from: number; to: number }> = [];
  const output = new Int32Array(answers.length).fill(-1);
  const row = new Int32Array(answers.length);
  const fixed: AnswerPlan["fixed"] = {};
  for (const [k, { status, body }] of answers.entries()) {
    if (packRows && status === 200 && isPackedRow(body)) {
      let at = runs.get(body.values);
      if (at === undefined) {
        at = outputs.length;
        runs.set(body.values, at);
        const { values, width, version, latencyMs } = body;
        outputs.push({ values, width, version, latencyMs });
        spans.push({ from: body.row, to: body.row });
      }
      const span = spans[at] as { from: number; to: number };
      span.from = Math.min(span.from, body.row);
      span.to = Math.max(span.to, body.row);
      output[k] = at;
      row[k] = body.row;
      continue;
    }
    fixed[k] = { status, body: JSON.stringify(body) ?? "null" };
  }
  // each run cut to the rows this chunk reads: a run is a whole group's output (2,048 lines),
  // read by each of its chunks (8 of MNIST's, 256 lines each), and a typed array crosses to a
  // thread with all of its buffer (the cut values are the plan's own: they move to it)
  for (const [at, run] of outputs.entries()) {
    const { from, to } = spans[at] as { from: number; to: number };
    run.values = run.values.slice(from * run.width, (to + 1) * run.width);
  }
  for (let k = 0; k < row.length; k++) {
    const span = spans[output[k] as number];
    if (span) row[k] = (row[k] as number) - span.from;
  }
  return { batch, first, requestIds, customIds, outputs, output, row, fixed };
}

/** A prediction's answer (the route's) from its row's values. */
export type PredictionOf = (logits: number[], version: string, latencyMs: number) => unknown;

/**
 * Renders a plan's lines as the output and error files have them, in the chunk's order: each
 * prediction made (`prediction`: its softmax) and printed here, which is most of a predict
 * line's cost on the offline path (a JSON number of 17 digits prints slower than its row runs).
 */
export function renderAnswers(plan: AnswerPlan, prediction?: PredictionOf): RenderedAnswers {
  if (plan.outputs.length > 0 && !prediction)
    throw new Error("a plan of packed predictions needs the function that makes them");
  const kept = new ChunkAnswers();
  const logits: number[] = [];
  for (let k = 0; k < plan.customIds.length; k++) {
    const id = lineId(plan.batch, plan.first + k);
    const customId = plan.customIds[k] ?? "";
    const requestId = `req_${plan.requestIds}${k.toString(16).padStart(8, "0")}`;
    const run = plan.outputs[plan.output[k] ?? -1];
    if (run) {
      const at = (plan.row[k] ?? 0) * run.width;
      logits.length = run.width;
      for (let v = 0; v < run.width; v++) logits[v] = run.values[at + v] ?? 0;
      const body = JSON.stringify(prediction?.(logits, run.version, run.latencyMs));
      kept.add(true, answerLineOf(id, customId, 200, requestId, body));
      continue;
    }
    const { status, body } = plan.fixed[k] ?? { status: 500, body: "null" };
    kept.add(status < 400, answerLineOf(id, customId, status, requestId, body));
  }
  return { encoded: kept.encode(), ok: kept.okLines, failed: kept.failedLines };
}
