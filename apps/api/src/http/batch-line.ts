import type { z } from "@hono/zod-openapi";
import type { BatchEndpoint } from "./batch-endpoints.js";
import type { CallOptions } from "./call.js";
import { invalidInput } from "./errors.js";
import type { PackedLines } from "./packed-lines.js";

/**
 * One endpoint's lines in an OpenAI-shaped batch: each protocol folder supplies its own (chat
 * and completions, Responses, predict), handed to the batch runner at boot, so that a line is
 * checked and answered exactly as that route's request would be without the batches folder
 * knowing any protocol.
 */
export interface BatchLineKind {
  readonly endpoint: BatchEndpoint;
  /**
   * Lines of one batch in flight at once (a cheap row needs many to fill a model's batches and
   * share Redis's round trips). @defaultValue 64
   */
  readonly linesInFlight?: number;
  /**
   * What the route answers `body` (sent to `url`) with, or the error it fails with; `signal`
   * stops it (the batch was cancelled or expired meanwhile).
   */
  run(url: string, body: unknown, opts: CallOptions, signal: AbortSignal): Promise<unknown>;
  /**
   * Where a kind answers many lines better together than one by one: what answers them for one
   * run of a batch (`owner`'s), closed when the run ends.
   */
  openMany?(owner: string): ManyLines;
}

/** Many lines at once, for one run of a batch (`BatchLineKind.openMany`). */
export interface ManyLines {
  /**
   * Each line's answer or its error, in order (up to a file chunk's lines at once); undefined
   * once `signal` stopped them (nothing is recorded then).
   */
  run(
    lines: ReadonlyArray<{ url: string; body: unknown }>,
    opts: CallOptions,
    signal: AbortSignal,
  ): Promise<LineOutcome[] | undefined>;
  /**
   * `run` for a chunk's lines the upload packed (plain predict lines: their features alone),
   * read where they are; a kind without it is given the chunk's lines to `run`.
   */
  runPacked?(
    lines: PackedLines,
    opts: CallOptions,
    signal: AbortSignal,
  ): Promise<LineOutcome[] | undefined>;
  /** The run ended; `stopped`: cancelled or out of its window, what is still queued goes. */
  close(stopped: boolean): Promise<void>;
}

/**
 * A prediction a kind answers many lines with, still as its row of a run's values (its
 * softmax not yet taken): a chunk's answers are then rendered together, off the API's loop.
 * Its JSON is the route's answer.
 */
export interface PackedRow {
  readonly [PACKED_ROW]: true;
  /** The run's values, `width` a row. */
  readonly values: Float32Array;
  readonly width: number;
  readonly row: number;
  readonly version: string;
  readonly latencyMs: number;
  toJSON(): unknown;
}

/** The brand of a `PackedRow`. */
export const PACKED_ROW: unique symbol = Symbol("packed row");

export function isPackedRow(value: unknown): value is PackedRow {
  return typeof value === "object" && value !== null && PACKED_ROW in value;
}

/** What a line came to: the route's answer, or the error the route fails it with. */
export type LineOutcome = { value: unknown } | { error: unknown };

/** A line's body checked by its route's schema, failing as the route's validation fails. */
export function lineBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const checked = schema.safeParse(body);
  if (!checked.success) throw invalidInput(checked.error.issues);
  return checked.data;
}

/**
 * A line's call options: the batch's (its tenant, the lowest priority, the deadline its window
 * leaves), with the body's own deadline where it is shorter and its cache choice, as a route
 * reads them from a body. A line's priority stays the batch's: batches yield to live traffic.
 */
export function lineOptions(
  opts: CallOptions,
  body: { timeout_ms?: number | null | undefined; cache?: boolean | null | undefined },
): CallOptions {
  const own = body.timeout_ms ?? undefined;
  const timeoutMs =
    own === undefined || opts.timeoutMs === undefined
      ? opts.timeoutMs
      : Math.min(own, opts.timeoutMs);
  return { ...opts, timeoutMs, ...(typeof body.cache === "boolean" ? { cache: body.cache } : {}) };
}
