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
