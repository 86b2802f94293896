import { FerryError } from "@ferry/protocol";
import { endpointOf } from "../http/batch-endpoints.js";
import {
  type BatchLineKind,
  type LineOutcome,
  lineBody,
  lineOptions,
  type ManyLines,
} from "../http/batch-line.js";
import type { CallOptions } from "../http/call.js";
import type { PackedLines } from "../http/packed-lines.js";
import type { InferenceService } from "./inference-service.js";
import type { PackedPredictions, PackedRun } from "./packed-predictions.js";
import { type PredictBody, predictBodySchema } from "./schemas.js";

/**
 * `/v1/models/{model}/predict` lines, each answered as that predict route answers (the model
 * its url names, the version its traffic split draws); many at once on the offline path,
 * packed per model (`PackedPredictions`): a sync request per line ran at a tenth of it.
 */
export function predictBatchLines(
  inference: InferenceService,
  packed: PackedPredictions,
): BatchLineKind {
  return {
    endpoint: "/v1/models/{model}/predict",
    // a row computes in microseconds: a thousand in flight fill max_batch_size groups each turn
    linesInFlight: 1_024,
    run(url, raw, opts) {
      const model = endpointOf(url)?.model;
      if (model === undefined) throw new FerryError("NOT_FOUND", `No route for POST ${url}`);
      const body = lineBody(predictBodySchema, raw);
      return inference.predict(model, undefined, body, lineOptions(opts, body));
    },
    openMany(owner: string): ManyLines {
      const run = packed.open(owner);
      return {
        run: (lines, opts, signal) => predictMany(inference, run, lines, opts, signal),
        runPacked: (lines, opts, signal) => predictPacked(inference, run, lines, opts, signal),
        close: (stopped) => run.close(stopped),
      };
    },
  };
}

/**
 * Lines' predictions, packed per model their urls name; undefined once `signal` stopped. A
 * line's own `timeout_ms` holds where it is shorter than what the batch's window leaves, as
 * for a line sent alone: a model's lines run together under the longest of them, and a line
 * whose answer came after its own deadline is that deadline's 504. Grouping by the timeouts
 * themselves would let a file of distinct ones (a caller's choice) make a job per line.
 */
async function predictMany(
  inference: Pick<InferenceService, "resolveClassifier">,
  packed: PackedRun,
  lines: ReadonlyArray<{ url: string; body: unknown }>,
  opts: CallOptions,
  signal: AbortSignal,
): Promise<LineOutcome[] | undefined> {
  const outcomes: LineOutcome[] = new Array(lines.length);
  type Group = {
    model: string;
    /** The longest of the lines' own timeouts; undefined once a line has none. */
    longest: number | undefined;
    lines: Array<{ at: number; body: PredictBody }>;
  };
  const groups = new Map<string, Group>();
  for (const [at, line] of lines.entries()) {
    try {
      const model = endpointOf(line.url)?.model;
      if (model === undefined) throw new FerryError("NOT_FOUND", `No route for POST ${line.url}`);
      // the model before the body, as the route answers: an unknown one is a 404 either way
      if (!groups.has(model)) inference.resolveClassifier(model, undefined);
      const body = lineBody(predictBodySchema, line.body);
      const own = body.timeout_ms ?? undefined;
      let group = groups.get(model);
      if (!group) {
        group = { model, longest: own, lines: [] };
        groups.set(model, group);
      } else if (group.longest !== undefined)
        group.longest = own === undefined ? undefined : Math.max(group.longest, own);
      group.lines.push({ at, body });
    } catch (error) {
      outcomes[at] = { error };
    }
  }
  const started = Date.now();
  // each model's lines at once: one a worker is slow to serve holds only its own
  const stopped = await Promise.all(
    [...groups.values()].map(async ({ model, longest, lines: group }) => {
      let answers: Awaited<ReturnType<PackedRun["run"]>>;
      try {
        answers = await packed.run(
          model,
          group.map((g) => g.body),
          lineOptions(opts, { timeout_ms: longest }),
          signal,
        );
      } catch (error) {
        for (const { at } of group) outcomes[at] = { error };
        return false;
      }
      if (!answers) return true;
      const answeredAfter = Date.now() - started;
      for (const [k, { at, body }] of group.entries()) {
        const answer = answers[k];
        const own = body.timeout_ms ?? undefined;
        outcomes[at] =
          own !== undefined && answeredAfter > own
            ? { error: lateLine(own) }
            : answer instanceof FerryError
              ? { error: answer }
              : { value: answer };
      }
      return false;
    }),
  );
  if (stopped.includes(true)) return undefined;
  return outcomes;
}

/**
 * A chunk's packed lines' predictions (features alone, no timeout_ms of their own), each model's
 * rows read from where they are packed: what `predictMany` answers their lines, without a body
 * per line. Undefined once `signal` stopped.
 */
async function predictPacked(
  inference: Pick<InferenceService, "resolveClassifier">,
  packed: PackedRun,
  lines: PackedLines,
  opts: CallOptions,
  signal: AbortSignal,
): Promise<LineOutcome[] | undefined> {
  const { widths, urls } = lines;
  const outcomes: LineOutcome[] = new Array(widths.length);
  const starts = new Uint32Array(widths.length);
  const groups = new Map<string, number[]>();
  /** Each url's model, or the error its lines fail with (the route's 404). */
  const models = new Map<string, { model: string } | { error: unknown }>();
  for (let r = 0, at = 0; r < widths.length; at += widths[r] ?? 0, r++) {
    starts[r] = at;
    const url = urls[r] ?? "";
    let route = models.get(url);
    if (!route) {
      try {
        const model = endpointOf(url)?.model;
        if (model === undefined) throw new FerryError("NOT_FOUND", `No route for POST ${url}`);
        inference.resolveClassifier(model, undefined);
        route = { model };
      } catch (error) {
        route = { error };
      }
      models.set(url, route);
    }
    if ("error" in route) {
      outcomes[r] = { error: route.error };
      continue;
    }
    const group = groups.get(route.model) ?? [];
    groups.set(route.model, group);
    group.push(r);
  }
  // read only when a worker cannot be handed the rows where they lie (a chunk of several
  // models' lines, a row of the wrong width): once, whichever model's lines ask first
  let loading: Promise<Float32Array> | undefined;
  let values: Float32Array = new Float32Array(0);
  const stopped = await Promise.all(
    [...groups].map(async ([model, group]) => {
      const rows = {
        count: group.length,
        width: (k: number) => widths[group[k] ?? 0] ?? 0,
        features: (k: number) => {
          const r = group[k] ?? 0;
          const start = starts[r] ?? 0;
          return values.subarray(start, start + (widths[r] ?? 0));
        },
        load: async () => {
          loading ??= lines.values();
          values = await loading;
        },
        // every line this model's: the worker reads the rows where the file keeps them
        ...(group.length === widths.length ? { source: lines.source } : {}),
      };
      let answers: Awaited<ReturnType<PackedRun["runRows"]>>;
      try {
        answers = await packed.runRows(model, rows, lineOptions(opts, {}), signal);
      } catch (error) {
        for (const r of group) outcomes[r] = { error };
        return false;
      }
      if (!answers) return true;
      for (const [k, r] of group.entries()) {
        const answer = answers[k];
        outcomes[r] = answer instanceof FerryError ? { error: answer } : { value: answer };
      }
      return false;
    }),
  );
  if (stopped.includes(true)) return undefined;
  return outcomes;
}

function lateLine(timeoutMs: number): FerryError {
  return new FerryError(
    "DEADLINE_EXCEEDED",
    `Deadline exceeded: the line's timeout_ms (${timeoutMs}) passed before its answer`,
  );
}
