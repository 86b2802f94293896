import { z } from "zod";
import type { CompletionResult } from "./generation.js";
import { wireErrorSchema } from "./wire.js";

export const jobStatusSchema = z.enum([
  "queued",
  "running",
  "succeeded",
  "failed",
  "cancelled",
  "expired",
]);
export type JobStatus = z.infer<typeof jobStatusSchema>;

/** API priority: 1 (lowest) to 10 (highest); requests that name none run at 5. */
export const prioritySchema = z.number().int().min(1).max(10);
export const DEFAULT_PRIORITY = 5;

/**
 * The band of a priority, highest first: 0 (8-10), 1 (4-7), 2 (1-3). The sync lane keeps a
 * Stream per band, and a generator's engine seats the bands in this order.
 */
export function priorityBand(priority: number): number {
  if (priority >= 8) return 0;
  if (priority >= 4) return 1;
  return 2;
}

/** The lowest band, offline batches' (they run at priority 1): it yields seats to the others. */
export const BATCH_BAND = 2;

/**
 * The longest deadline a request may ask for, in ms (one hour). Node's timers overflow past
 * 2^31 - 1 ms and fire at once, so an unbounded timeout would expire at once instead of never.
 */
export const MAX_TIMEOUT_MS = 3_600_000;
/** A request's deadline from now, in ms: a whole number from 1 to MAX_TIMEOUT_MS. */
export const timeoutMsSchema = z.number().int().positive().max(MAX_TIMEOUT_MS);

/**
 * Turns within one priority (start-time fair queuing): a key's job takes the turn after its
 * key's last job still waiting at that priority, or, with none waiting, the turn of the
 * priority's first waiting job, so that within a priority BullMQ runs every key's first
 * waiting job before anyone's second, and one key's jobs in the order they came. The admin's
 * and an open API's jobs take turn 0. Room for 131,072 turns a priority (BullMQ's priorities
 * go to 2^21): past that a busy priority's turns share the last, first come first served.
 */
export const TURNS = 131_072;

/**
 * BullMQ runs priority 1 first; Ferry's 10 is the most urgent, and within one priority the
 * lower turn first (then the order of arrival).
 */
export function bullPriority(priority: number, turn = 0): number {
  return (11 - priority) * TURNS + Math.min(TURNS - 1, Math.max(0, Math.floor(turn)));
}

/**
 * What a generator job returns to BullMQ: its result without its logprobs, flagged: the
 * whole result is its log's `result` event, read from there. BullMQ keeps a job's return
 * value in its hash and again in its queue's events stream, which has no TTL, only a length
 * (10,000 entries), and one completion's logprobs (top-20 alternatives a token) are
 * megabytes: ~750 MB a model version, kept. An API older than its workers (a rolling upgrade
 * upgrades the workers first) still reads a result here, without the logprobs it asked for.
 */
export type ResultInLog = Omit<CompletionResult, "logprobs" | "prompt_logprobs"> & {
  result_in_log: true;
};

export function resultInLog(result: CompletionResult): ResultInLog {
  const { logprobs: _, prompt_logprobs: __, ...rest } = result;
  return { ...rest, result_in_log: true };
}

export function isResultInLog(value: unknown): value is ResultInLog {
  return (value as Partial<ResultInLog> | null)?.result_in_log === true;
}

/** What a ResultInLog holds of its result: all but the logprobs. */
export function withoutFlag(value: ResultInLog): CompletionResult {
  const { result_in_log: _, ...result } = value;
  return result;
}

/**
 * A request's priority from its BullMQ job's (bullPriority's inverse; 0: none was given; 1-10:
 * a job queued before turns, by a version that wrote the priority alone).
 */
export function priorityOfBull(bull: number): number {
  if (bull <= 0) return DEFAULT_PRIORITY;
  return bull <= 10 ? 11 - bull : 11 - Math.floor(bull / TURNS);
}

export const TERMINAL_STATUSES: readonly JobStatus[] = [
  "succeeded",
  "failed",
  "cancelled",
  "expired",
];
export { wireErrorSchema };
