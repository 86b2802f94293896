import { z } from "zod";
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
 * The longest deadline a request may ask for, in ms (one hour). Node's timers overflow past
 * 2^31 - 1 ms and fire at once, so an unbounded timeout would expire at once instead of never.
 */
export const MAX_TIMEOUT_MS = 3_600_000;
/** A request's deadline from now, in ms: a whole number from 1 to MAX_TIMEOUT_MS. */
export const timeoutMsSchema = z.number().int().positive().max(MAX_TIMEOUT_MS);

/** BullMQ runs priority 1 first; Ferry's 10 is the most urgent. */
export function bullPriority(priority: number): number {
  return 11 - priority;
}

export const TERMINAL_STATUSES: readonly JobStatus[] = [
  "succeeded",
  "failed",
  "cancelled",
  "expired",
];
export { wireErrorSchema };
